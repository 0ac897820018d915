// Package transfer is ../before, the money transfer in the style of
// Temporal's Go samples, with onceflow adopted: its worker attaches
// onceflow to its own Temporal client and Redis client and registers the
// two activities through it; the workflow, the activities, the bank's
// errors and the tests are unchanged. docs/adopting.md shows the diff, and
// TestAdoptionDiff counts it.
package transfer
