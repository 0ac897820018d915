package operator_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/onceflow/onceflow/operator"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// An EvidenceSource for a step of your own: ask the downstream by the
// step's operation key (for an activity with a BusinessKey, the incident's
// record key) and say what it implies. Assess puts the evidence beside
// each pending incident; the console and worker trace show it, and a
// decision sent with it that contradicts it needs a confirmation.
func ExampleEvidenceSource() {
	shipped := map[string]string{"ship-parcel:d1:aa": "tracking 1Z999"} // the carrier's records, by operation key
	src := operator.EvidenceFunc(func(_ context.Context, s operator.Step) (idemwf.Evidence, error) {
		if !strings.HasPrefix(s.Pending.Incident.RecordKey, "ship-parcel:") {
			return idemwf.Evidence{}, operator.ErrNoEvidence
		}
		if tracking, ok := shipped[s.Pending.Incident.RecordKey]; ok {
			return idemwf.Evidence{Summary: "the carrier has the parcel: " + tracking, Implies: idemwf.Completed,
				Result: []byte(`{"tracking":"` + strings.TrimPrefix(tracking, "tracking ") + `"}`)}, nil
		}
		return idemwf.Evidence{Summary: "the carrier has no parcel", Implies: idemwf.Retry}, nil
	})
	list := []operator.Waiting{{WorkflowID: "order-42", Pending: []idemwf.PendingRecovery{
		{Incident: idemwf.Incident{RecordKey: "ship-parcel:d1:aa", Attempt: 1, Rev: 2}, Activity: "ShipParcel"},
		{Incident: idemwf.Incident{RecordKey: "ship-parcel:d1:bb", Attempt: 1, Rev: 2}, Activity: "ShipParcel"},
	}}}
	assessed, err := operator.Assess(context.Background(), src, list)
	if err != nil {
		fmt.Println(err)
	}
	for _, a := range assessed {
		fmt.Printf("%s: %s (implies %s)\n", a.Pending.Incident, a.Evidence.Summary, a.Evidence.Implies)
	}
	// A retry against the first one's evidence is not sent unconfirmed.
	res := idemwf.Resolution{RecordKey: "ship-parcel:d1:aa", Attempt: 1, Rev: 2, Decision: idemwf.Retry, Evidence: assessed[0].Evidence}
	_, err = operator.Resolve(context.Background(), nil, "order-42", "", res)
	fmt.Println(errors.Is(err, operator.ErrContradictsEvidence))
	// Output:
	// ship-parcel:d1:aa@1.2: the carrier has the parcel: tracking 1Z999 (implies completed)
	// ship-parcel:d1:bb@1.2: the carrier has no parcel (implies retry)
	// true
}
