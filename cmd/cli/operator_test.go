package cli_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/cmd/cli"
	"github.com/onceflow/onceflow/harness/redistest"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/redisstore"
	"github.com/onceflow/onceflow/operator"
)

// TestReopenCommand: an ABANDONED record no workflow waits on
// (an HTTP key whose handler's outcome was unknown) is refused until an
// operator reopens it; then the next request runs.
func TestReopenCommand(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ns := redistest.Namespace(t)
	store, err := redisstore.New(redisstore.Config{Client: redistest.NewClient(t, srv.Addr()), Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: store, Lease: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	dig, err := onceflow.NewDigester([]byte("operator test secret, 32 bytes.."), 1)
	if err != nil {
		t.Fatal(err)
	}
	ref := onceflow.Ref{Code: "http", Digest: dig.Digest("k")}
	req := idemstore.Request{Ref: ref, Operation: dig.Operation("op"), Fingerprint: onceflow.FingerprintOf([]byte("body")), Codec: "raw"}
	runs := 0
	unknown := func(context.Context) ([]byte, error) {
		runs++
		return nil, idemstore.EffectUnknown(errors.New("the handler answered 502"))
	}
	ok := func(context.Context) ([]byte, error) { runs++; return []byte("done"), nil }
	if _, err := exec.Execute(t.Context(), req, unknown); err == nil {
		t.Fatal("an unknown effect was not reported")
	}
	if _, err := exec.Execute(t.Context(), req, ok); !errors.Is(err, onceflow.OutcomeEffectUnknown) || runs != 1 {
		t.Fatalf("before reopen: err %v, %d runs", err, runs)
	}
	var out bytes.Buffer
	args := []string{"-record", ref.String(), "-redis-url", "redis://" + srv.Addr() + "/0", "-key-namespace", ns, "-reason", "no charge at the provider"}
	if err := cli.RunOperator(t.Context(), "reopen", args, func(string) string { return "" }, &out, nil); err != nil ||
		!strings.Contains(out.String(), "reopened") || !strings.Contains(out.String(), "ABANDONED") {
		t.Fatalf("reopen: %q, %v", out.String(), err)
	}
	if res, err := exec.Execute(t.Context(), req, ok); err != nil || string(res.Response) != "done" || runs != 2 {
		t.Fatalf("after reopen: %+v, %v, %d runs", res, err, runs)
	}
	out.Reset()
	if err := cli.RunOperator(t.Context(), "reopen", args, func(string) string { return "" }, &out, nil); err == nil || !strings.Contains(err.Error(), "COMPLETED") {
		t.Fatalf("reopening a COMPLETED record: %v", err)
	}
	missing := []string{"-record", onceflow.Ref{Code: "http", Digest: dig.Digest("never used")}.String(), "-redis-url", "redis://" + srv.Addr() + "/0", "-key-namespace", ns}
	if err := cli.RunOperator(t.Context(), "reopen", missing, func(string) string { return "" }, &out, nil); err == nil || !strings.Contains(err.Error(), "-key-namespace") {
		t.Fatalf("reopening a missing record: %v, want it to name -key-namespace", err)
	}
}

// TestInspectCommandPrintsARecordAndFailsOnACorruptOne: inspect by -code and
// -key (the business key, digested with ONCEFLOW_SECRET) prints the
// record; a corrupt record is reported and the command fails.
func TestInspectCommandPrintsARecordAndFailsOnACorruptOne(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ns := redistest.Namespace(t)
	rdb := redistest.NewClient(t, srv.Addr())
	store, err := redisstore.New(redisstore.Config{Client: rdb, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	const secret = "inspect test secret, 32 bytes..."
	dig, err := onceflow.NewDigester([]byte(secret), 1)
	if err != nil {
		t.Fatal(err)
	}
	ref := operator.BusinessRef(dig, "default", "charge-card", "order-1/charge")
	req := idemstore.Request{Ref: ref, Operation: dig.Operation("op"), Fingerprint: onceflow.FingerprintOf([]byte("body"))}
	if _, err := exec.Execute(t.Context(), req, func(context.Context) ([]byte, error) { return []byte("ch_1"), nil }); err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string {
		if k == "ONCEFLOW_SECRET" {
			return secret
		}
		return ""
	}
	args := []string{"-code", "charge-card", "-key", "order-1/charge", "-namespace", "default", "-redis-url", "redis://" + srv.Addr() + "/0", "-key-namespace", ns}
	var out bytes.Buffer
	if err := cli.RunOperator(t.Context(), "inspect", args, getenv, &out, nil); err != nil ||
		!strings.Contains(out.String(), ref.String()) || !strings.Contains(out.String(), "COMPLETED attempt 1 rev 2") || !strings.Contains(out.String(), "response 4 bytes") {
		t.Fatalf("inspect: %q, %v", out.String(), err)
	}
	if err := rdb.HSet(t.Context(), store.Key(ref), "state", "BOGUS").Err(); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err = cli.RunOperator(t.Context(), "inspect", append(args, "-json"), getenv, &out, nil)
	if !errors.Is(err, onceflow.OutcomeCorrupt) || !strings.Contains(out.String(), `"corrupt"`) {
		t.Fatalf("a corrupt record: %q, %v", out.String(), err)
	}
}

// TestReusesCommandPrintsTheTrail: a business reference that arrives
// under a second operation key (once flagged, once refused) is listed by
// `worker reuses`, newest first, and -code filters it.
func TestReusesCommandPrintsTheTrail(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ns := redistest.Namespace(t)
	store, err := redisstore.New(redisstore.Config{Client: redistest.NewClient(t, srv.Addr()), Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	exec, err := idemstore.NewExecutor(idemstore.ExecutorConfig{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	dig, err := onceflow.NewDigester([]byte("reuses test secret, 32 bytes...."), 1)
	if err != nil {
		t.Fatal(err)
	}
	ref := onceflow.Ref{Code: "withdraw", Digest: dig.Digest("transfer-7")}
	for i, key := range []string{"withdraw:d1:first", "withdraw:d1:second", "withdraw:d1:third"} {
		_, err := exec.CheckReference(t.Context(), idemstore.ReferenceCheck{Reference: ref, Key: key, Window: time.Hour, Refuse: i == 2})
		if (err != nil) != (i == 2) {
			t.Fatalf("check %d: %v", i, err)
		}
	}
	args := []string{"-redis-url", "redis://" + srv.Addr() + "/0", "-key-namespace", ns}
	var out bytes.Buffer
	if err := cli.RunOperator(t.Context(), "reuses", args, func(string) string { return "" }, &out, nil); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], "refused") || !strings.Contains(lines[1], "withdraw:d1:third") ||
		!strings.Contains(lines[2], "flagged") || !strings.Contains(lines[2], "withdraw:d1:first") || !strings.Contains(lines[2], "withdraw:d1:second") {
		t.Fatalf("reuses printed:\n%s", out.String())
	}
	out.Reset()
	if err := cli.RunOperator(t.Context(), "reuses", append(args, "-code", "deposit"), func(string) string { return "" }, &out, nil); err != nil ||
		strings.TrimSpace(out.String()) != "no reused references" {
		t.Fatalf("-code deposit: %q, %v", out.String(), err)
	}
}
