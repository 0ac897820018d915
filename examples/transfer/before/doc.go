// Package transfer is a money transfer in the style of Temporal's Go
// samples, without onceflow: a workflow that withdraws and deposits
// through two activities, the bank's typed errors that the workflow does
// not retry, its own worker bootstrap and its testsuite tests.
//
// ../after is the same service with onceflow adopted; docs/adopting.md
// shows the diff, and TestAdoptionDiff counts it.
package transfer
