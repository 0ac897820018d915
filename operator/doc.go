// Package operator is onceflow's operator API: what a person (or a tool of
// theirs) needs to see and settle the recoveries that wait on a decision.
//
//   - ListPending lists the running workflows of the namespace (or of one
//     task queue) that wait on a decision, whatever their type;
//     CheckPendingAttribute checks the search attribute that finds them.
//     Pending reads one workflow's incidents and the decisions it refused,
//     PendingRecoveries just its incidents.
//   - Resolve sends a decision (completed, retry, fail) about one incident
//     to the waiting workflow and returns its answer; SignalResolve sends
//     it fire-and-forget.
//   - Decisions lists the decisions a workflow applied, with their audit
//     (request ID, who, when, why, the evidence shown).
//   - EvidenceSource is the hook through which a user says what the
//     downstream holds for a step; Assess asks it for each pending
//     incident, and Resolve refuses to send a decision that contradicts
//     its evidence unless it is confirmed with a reason.
//   - Reopen moves a FAILED record, or an ABANDONED one no workflow waits
//     on, to FAILED_RETRYABLE, so the next attempt or request runs.
//   - Inspect reads one Redis record, read-only; BusinessRef names the
//     record of an activity keyed by a business key, HTTPRef the record
//     of an HTTP request's Idempotency-Key.
//
// Every function takes the context first and the clients it talks to
// explicitly (a Temporal client.Client, an driver.Store): it opens no
// connection and reads no flag or environment variable. Errors are
// returned, never logged and dropped. cmd/worker's pending, resolve,
// reopen, inspect and trace commands and its operator console are built on
// it.
package operator
