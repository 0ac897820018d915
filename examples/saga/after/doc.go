// Package saga is Temporal's Go saga sample (../before) with onceflow
// adopted: the worker is onceflow's SDK worker (worker.NewSDKWorker), so
// the withdrawal, the deposit and their compensations run once per
// operation even when a worker dies in the middle of one, and an effect
// whose fate is unknown waits in the workflow for a decision instead of
// failing the saga after its three attempts. StepWithError, which has no
// side effect, stays an ordinary activity (registered on Unwrap()). The
// workflow, the activities, the bank and the tests are ../before's, byte
// for byte; examples/adoption_test.go counts what changed
// (docs/adopting.md).
package saga
