// Package handshake is the contract between onceflow's activity side (the
// activity package, which wraps and registers activities) and its
// workflow side (the workflow package's Interceptor and recovery): the
// names under which the activity package registers onceflow's own
// activities (ResolveRecordActivity, SettleActivity, ReconcileActivity),
// what they take and return, the details a wrapped activity's retryable
// errors carry (RetryDetails), the catalog of wrapped activities the
// Interceptor consults (Catalog), and the header that hands an activity
// its retry policy's non-retryable error types (NonRetryableTypesHeader).
//
// The inputs and results cross Temporal as JSON: a worker and a workflow
// of different builds must agree on them, so a field is added, never
// renamed. Nothing here is API: a service uses the activity and workflow
// packages, which keep both sides in step.
package handshake
