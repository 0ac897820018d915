package order

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/onceflow/onceflow/examples/order/ledger"
	"github.com/onceflow/onceflow/operator"
	idemwf "github.com/onceflow/onceflow/workflow"
)

// ChargeEvidence is the order system's operator.EvidenceSource: for a
// charge whose effect is unknown it reads what the gateway and the ledger
// hold under the charge's operation key (the incident's record key, the
// charge having a BusinessKey): the gateway's calls and their outcomes,
// and the ledger's payment row. A call that took money implies
// idemwf.Completed, with the payment pre-filled (the status, the gateway's
// charge ID, the amount: what ledger.Payment needs of an operator); a decline implies Completed with a declined payment; no
// call that took money or was declined implies idemwf.Retry. It changes
// nothing. Other steps are operator.ErrNoEvidence.
type ChargeEvidence struct {
	Ledger *ledger.Ledger
}

// Evidence reads the charge's evidence (see ChargeEvidence).
func (e ChargeEvidence) Evidence(ctx context.Context, step operator.Step) (idemwf.Evidence, error) {
	if step.Pending.Activity != ChargeCardActivity {
		return idemwf.Evidence{}, operator.ErrNoEvidence
	}
	key := step.Pending.Incident.RecordKey
	calls, err := e.Ledger.GatewayCallsByKey(ctx, key)
	if err != nil {
		return idemwf.Evidence{}, fmt.Errorf("order: read the gateway's calls for %s: %w", key, err)
	}
	row, hasRow, err := e.Ledger.PaymentByKey(ctx, key)
	if err != nil {
		return idemwf.Evidence{}, fmt.Errorf("order: read the ledger's payment for %s: %w", key, err)
	}
	var ev idemwf.Evidence
	var charged, declined *ledger.GatewayCall
	for i, c := range calls {
		ev.Facts = append(ev.Facts, fmt.Sprintf("gateway call %s at %s: %s%s, %s",
			c.ID, c.CalledAt.UTC().Format(time.RFC3339), c.Outcome, chargeOf(c.ChargeID), ledger.FormatMoney(c.AmountCents, c.Currency)))
		switch {
		case c.Charged() && charged == nil:
			charged = &calls[i]
		case c.Outcome == ledger.CallDeclined && declined == nil:
			declined = &calls[i]
		}
	}
	if hasRow {
		ev.Facts = append(ev.Facts, fmt.Sprintf("ledger payment %s: %s%s, %s", row.ID, row.Status, chargeOf(row.GatewayChargeID), ledger.FormatMoney(row.AmountCents, row.Currency)))
	} else {
		ev.Facts = append(ev.Facts, "ledger: no payment row")
	}
	var implied *completion
	switch {
	case charged != nil:
		ev.Implies = idemwf.Completed
		implied = &completion{Status: ledger.PaymentCaptured, GatewayChargeID: charged.ChargeID, AmountCents: charged.AmountCents, Currency: charged.Currency}
		ev.Summary = fmt.Sprintf("the gateway charged %s (charge %s, %s): complete the step with that charge", ledger.FormatMoney(charged.AmountCents, charged.Currency),
			charged.ChargeID, charged.Outcome)
	case declined != nil:
		ev.Implies = idemwf.Completed
		implied = &completion{Status: ledger.PaymentDeclined, AmountCents: declined.AmountCents, Currency: declined.Currency}
		ev.Summary = "the gateway declined the card: complete the step with the decline"
	default:
		ev.Implies = idemwf.Retry
		ev.Summary = fmt.Sprintf("the gateway took no money under this operation key (%d calls, none charged): retry the charge", len(calls))
	}
	if implied != nil {
		if ev.Result, err = json.Marshal(implied); err != nil {
			return idemwf.Evidence{}, err
		}
	}
	return ev, nil
}

// completion is the part of a ledger.Payment an operator's completed
// decision needs (RecordPayment fills in the rest): what the evidence
// pre-fills.
type completion struct {
	Status          string `json:"status"`
	GatewayChargeID string `json:"gateway_charge_id,omitempty"`
	AmountCents     int64  `json:"amount_cents"`
	Currency        string `json:"currency"`
}

func chargeOf(id string) string {
	if id == "" {
		return ""
	}
	return " " + id
}
