// Package onceflowtest runs a service's activities through onceflow in its
// unit tests: on the SDK testsuite (go.temporal.io/sdk/testsuite), with an
// in-memory Redis (miniredis) in place of a server, as riverqueue's
// rivertest does for River. A test registers its activities with
// activity.Register on the test environment, as the service does on its
// worker, and the workflow under test runs them as it runs in production:
// wrapped, deduplicated and recovered.
//
//	env := suite.NewTestWorkflowEnvironment()
//	once := onceflowtest.Attach(t, env)
//	onceactivity.Register(env, once.Activities, a.Withdraw)
//
// docs/testing.md shows what to test with it.
package onceflowtest
