package console_test

import (
	"context"
	"log"
	"net/http"

	"go.temporal.io/sdk/client"

	"github.com/onceflow/onceflow/console"
	"github.com/onceflow/onceflow/operator"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// A service mounts the console on its own mux, with its Temporal client
// and, optionally, what its downstream says about a pending step. (Not
// run: it needs a Temporal server.)
func Example_mount() {
	tc, err := client.Dial(client.Options{HostPort: "127.0.0.1:7233"})
	if err != nil {
		log.Fatal(err)
	}
	defer tc.Close()
	transfers := operator.EvidenceFunc(func(ctx context.Context, step operator.Step) (idemwf.Evidence, error) {
		// Ask the bank what it holds under the step's operation key
		// (step.Pending.RecordKey) and say which decision that implies.
		return idemwf.Evidence{}, operator.ErrNoEvidence
	})
	con, err := console.New(console.Config{
		Client:    tc,
		TaskQueue: "transfers",
		Token:     "<64 hex digits: openssl rand -hex 32>",
		Evidence:  transfers,
	})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	con.Register(mux) // /console, /console/workflows/{id}, POST /console/resolve
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", mux))
}
