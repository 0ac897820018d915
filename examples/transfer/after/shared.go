package transfer

// MoneyTransferTaskQueueName is the task queue the worker polls.
const MoneyTransferTaskQueueName = "TRANSFER_MONEY_TASK_QUEUE"

// PaymentDetails is the transfer: the workflow's and the activities' input.
type PaymentDetails struct {
	SourceAccount string
	TargetAccount string
	Amount        int
	ReferenceID   string
}
