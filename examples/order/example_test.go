package order_test

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/onceflow/onceflow"
	onceactivity "github.com/onceflow/onceflow/activity"
	"github.com/onceflow/onceflow/examples/order"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/redisstore"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// The quick start: two workflows place the same order; the card is charged
// once and the second workflow gets the first one's receipt. (The SDK's test
// environment stands in for a Temporal server here; `go run ./examples/order/cmd/worker
// -dev` runs the same code on a real one.)
func Example() {
	// What worker.Run assembles for you.
	rdb := redis.NewClient(&redis.Options{Addr: redistest.SharedAddr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	store, _ := redisstore.New(redisstore.Config{Client: rdb, Namespace: fmt.Sprint("example-", time.Now().UnixNano())})
	exec, _ := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: store})
	digester, _ := onceflow.NewDigester([]byte("a secret from your secret store"), 1)

	provider := order.NewProvider()
	charge := order.Charge{OrderID: "order-42", Customer: "c-7", AmountCents: 1000}
	for _, workflowID := range []string{"place-order-42", "place-order-42-again"} {
		// Each test environment is a worker of its own, with its wrapper
		// over the same Redis and secret.
		wrapper, _ := onceactivity.New(onceactivity.Config{Executor: exec, Digester: digester})
		var suite testsuite.WorkflowTestSuite
		suite.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
		env := suite.NewTestWorkflowEnvironment()
		env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflowID})
		env.RegisterWorkflow(order.ChargeOrder)
		onceactivity.Register(env, wrapper, order.ChargeFunc(provider), order.ChargeOptions(provider)...)
		env.ExecuteWorkflow(order.ChargeOrder, charge)
		var receipt order.Receipt
		if err := env.GetWorkflowResult(&receipt); err != nil {
			panic(err)
		}
		fmt.Println(workflowID, "->", receipt.ChargeID)
	}
	fmt.Println("charges:", provider.Charges())
	// Output:
	// place-order-42 -> ch_1_order-42
	// place-order-42-again -> ch_1_order-42
	// charges: 1
}
