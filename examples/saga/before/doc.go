// Package saga is Temporal's Go saga sample, without onceflow: a money
// transfer that withdraws, deposits and then runs a step that always
// fails, so that the deposit and the withdrawal are compensated, in
// reverse order, by deferred compensation activities; activities that
// return only an error, a RetryPolicy of MaximumAttempts 3, its worker
// and its testsuite tests.
//
// It reproduces saga/ of github.com/temporalio/samples-go as read at
// commit 3c8a12e407354af125d86e654bd38621452d5714 (saga/ last changed in
// c0a074b5c8287251b2395f6cd7facc3f8c359369): shared.go, activity.go,
// workflow.go, worker/main.go and workflow_test.go. It differs where
// being a package of this module, and being counted by tests, requires:
//
//   - activity.go: the upstream activities are functions that only
//     print. Here they are the methods of Activities, on a Bank
//     (banking.go, new: the Bank interface and MemoryBank, which records
//     balances and operations), so that tests can count their effects.
//     Each keeps its Printf and calls the bank instead of returning nil:
//     Withdraw withdraws from FromAccount, WithdrawCompensation deposits
//     back into FromAccount, Deposit deposits into ToAccount,
//     DepositCompensation withdraws from ToAccount. Each passes its own
//     reference (ReferenceID plus "-withdraw", "-withdraw-compensation",
//     "-deposit", "-deposit-compensation"): a bank that deduplicates by
//     reference would otherwise take a compensation for the operation it
//     undoes. StepWithError is unchanged.
//   - workflow.go: the activities are named by method values of a nil
//     *Activities (same activity type names). go.uber.org/multierr is not
//     in go.mod, so multierr.Append(err, errCompensation) is errors.Join,
//     called only when the compensation failed: multierr.Append(err, nil)
//     returns err itself, while errors.Join(err, nil) wraps it, which
//     would turn the workflow's failure from StepWithError's activity
//     error into an application error of type joinError.
//   - worker.go: worker/main.go becomes RunWorker, run until its context
//     is done, with client.Options from Config instead of
//     contrib/envconfig (a module not in go.mod) and errors returned
//     instead of log.Fatalln; it registers the workflow and the five
//     activities one by one, as upstream does. start/main.go and
//     README.md are not reproduced: the tests start the workflow.
//   - workflow_test.go: upstream's Test_Workflow mocks every activity
//     with testify, which go.mod requires only indirectly; here it runs
//     the activities on a MemoryBank and checks with the testing package.
//     TestCompensationsRunInReverseOrder and TestTransferMoneySucceeds
//     (StepWithError replaced by a step that succeeds) are added.
//
// Doc comments are added only to what this copy adds.
//
// ../after is the same service with onceflow adopted.
package saga
