package main

import (
	"context"
	"fmt"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/examples/order"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/operator"
	"github.com/onceflow/onceflow/worker"
)

// chargeRecords counts the orders whose charge step ran to its end (a
// payment row in the ledger: charged or declined) and whose charge record
// is gone from Redis at the end of the run: completions Redis
// acknowledged and then lost (a wipe, a failover to a replica that lacked
// them). A lost record is what the workflow's evidence and the ledger
// then stand in for; the double-charge check says whether they did.
func (c *cluster) chargeRecords(ctx context.Context, rows []orderRow) (checked int, lost check, err error) {
	lost = check{Name: "charge completions lost (a payment row, and no charge record in Redis at the end)"}
	rdb := c.redis.client()
	defer rdb.Close()
	store, err := redisstore.New(redisstore.Config{Client: rdb, Namespace: worker.DefaultConfig().KeyNamespace, CommandTimeout: 5 * time.Second})
	if err != nil {
		return 0, lost, err
	}
	dig, err := onceflow.NewDigester([]byte(c.secret), 1)
	if err != nil {
		return 0, lost, err
	}
	for _, row := range rows {
		if row.PaymentRows == 0 {
			continue
		}
		checked++
		ref := operator.BusinessRef(dig, c.namespace, order.ChargeCode, row.OrderID+"/charge")
		obs, err := store.Inspect(ctx, ref)
		if err != nil {
			return checked, lost, fmt.Errorf("inspect the charge record of %s: %w", row.OrderID, err)
		}
		if !obs.Found {
			lost.add(row.OrderID + " (" + row.Status + ")")
		}
	}
	return checked, lost, nil
}
