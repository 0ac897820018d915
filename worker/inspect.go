package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/idemstore"
	"github.com/onceflow/onceflow/idemstore/redisstore"
)

// RecordReport is what inspect and trace print of one Redis record.
type RecordReport struct {
	// Key is the record key (code:d<version>:<digest>).
	Key   string `json:"key"`
	Found bool   `json:"found"`
	// Corrupt, when set, says how the stored record breaks the schema.
	Corrupt    string          `json:"corrupt,omitempty"`
	State      idemstore.State `json:"state,omitempty"`
	Attempt    int64           `json:"attempt,omitempty"`
	Rev        int64           `json:"rev,omitempty"`
	LeaseLeft  Duration        `json:"lease_left,omitempty"`
	TTLLeft    Duration        `json:"ttl_left,omitempty"`
	Codec      string          `json:"codec,omitempty"`
	Policy     int             `json:"policy,omitempty"`
	Response   int             `json:"response_bytes"`
	Uncertain  bool            `json:"uncertain,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	UpdatedAt  time.Time       `json:"updated_at,omitzero"`
	ServerTime time.Time       `json:"server_time,omitzero"`
}

// Duration prints as a Go duration string in JSON.
type Duration time.Duration

// MarshalJSON writes d as "1.5s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// InspectRecord reads one record (read-only: INSPECT changes nothing). A
// corrupt record is reported in the report and as an error matching
// idemstore.ErrCorruptRecord.
func InspectRecord(ctx context.Context, store idemstore.Store, ref idemstore.Ref) (RecordReport, error) {
	rep := RecordReport{Key: ref.String()}
	obs, err := store.Inspect(ctx, ref)
	var corrupt *idemstore.CorruptRecordError
	if errors.As(err, &corrupt) {
		rep.Found, rep.Corrupt = true, corrupt.Error()
		return rep, err
	}
	if err != nil {
		return rep, err
	}
	if !obs.Found {
		return rep, nil
	}
	r := obs.Record
	rep.Found, rep.State, rep.Attempt, rep.Rev = true, r.State, r.Attempt, r.Rev
	rep.LeaseLeft, rep.TTLLeft = Duration(r.LeaseRemaining()), Duration(r.TTL)
	rep.Codec, rep.Policy, rep.Response, rep.Uncertain, rep.Reason = r.Codec, r.Policy, len(r.Response), r.Uncertain, r.Reason
	rep.UpdatedAt, rep.ServerTime = r.UpdatedAt, obs.ServerTime
	return rep, nil
}

// WriteRecordReport prints a report as aligned lines.
func WriteRecordReport(out io.Writer, indent string, rep RecordReport) error {
	switch {
	case rep.Corrupt != "":
		_, err := fmt.Fprintf(out, "%srecord %s: CORRUPT: %s\n", indent, rep.Key, rep.Corrupt)
		return err
	case !rep.Found:
		_, err := fmt.Fprintf(out, "%srecord %s: none (never claimed, expired, or another -key-namespace)\n", indent, rep.Key)
		return err
	}
	line := fmt.Sprintf("%srecord %s: %s attempt %d rev %d, lease left %v, TTL left %v, codec %s policy %d, response %d bytes",
		indent, rep.Key, rep.State, rep.Attempt, rep.Rev, time.Duration(rep.LeaseLeft).Round(time.Millisecond),
		time.Duration(rep.TTLLeft).Round(time.Second), strconv.Quote(rep.Codec), rep.Policy, rep.Response)
	if rep.Uncertain {
		line += ", uncertain"
	}
	if rep.Reason != "" {
		line += ", reason " + strconv.Quote(rep.Reason)
	}
	_, err := fmt.Fprintln(out, line)
	return err
}

// OpenStore connects to c's Redis for an operator command.
func OpenStore(c Config) (*redisstore.Store, func() error, error) {
	opts, err := ParseRedisURL(c.RedisURL)
	if err != nil {
		return nil, nil, err
	}
	opts.ContextTimeoutEnabled = true
	rdb := redis.NewUniversalClient(opts)
	store, err := redisstore.New(redisstore.Config{Client: rdb, Namespace: c.KeyNamespace, CommandTimeout: 5 * time.Second})
	if err != nil {
		_ = rdb.Close()
		return nil, nil, err
	}
	return store, rdb.Close, nil
}

// OperatorDigester is the digester of the operator commands: the secret
// of ONCEFLOW_SECRET (and ONCEFLOW_SECRET_VERSION), or -dev's public one.
func OperatorDigester(getenv func(string) string, dev bool) (*idemstore.Digester, error) {
	secret, version := getenv("ONCEFLOW_SECRET"), 1
	if v := getenv("ONCEFLOW_SECRET_VERSION"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("ONCEFLOW_SECRET_VERSION must be a positive integer, got %q", v)
		}
		version = n
	}
	if secret == "" {
		if !dev {
			return nil, errors.New("set ONCEFLOW_SECRET to the workers' secret (or pass -dev for a -dev worker's records): keys are digested with it")
		}
		secret = devSecret
	}
	return idemstore.NewDigester([]byte(secret), version)
}

// BusinessRef is the record of an activity whose operation key is a
// business key (activity.Wrapper.BusinessOperationKey).
func BusinessRef(dig *idemstore.Digester, namespace string, code idemstore.OperationCode, key string) idemstore.Ref {
	return idemstore.Ref{Code: code, Digest: dig.Digest(onceflow.BusinessScope(namespace, key)...)}
}

// inspect prints one record: by -record, or by -code and -key (a business
// key, digested with the workers' secret and the Temporal namespace).
func inspect(ctx context.Context, c Config, getenv func(string) string, record, code, key string, dev, asJSON bool, out io.Writer) error {
	var ref idemstore.Ref
	switch {
	case record != "":
		r, err := idemstore.ParseRef(record)
		if err != nil {
			return fmt.Errorf("inspect: -record: %w", err)
		}
		ref = r
	case code != "" && key != "":
		oc, err := idemstore.ParseOperationCode(code)
		if err != nil {
			return fmt.Errorf("inspect: -code: %w", err)
		}
		dig, err := OperatorDigester(getenv, dev)
		if err != nil {
			return fmt.Errorf("inspect: %w", err)
		}
		ns := c.Namespace
		if ns == "" {
			ns = DefaultNamespace
		}
		ref = BusinessRef(dig, ns, oc, key)
	default:
		return errors.New("inspect: give -record KEY, or -code CODE -key KEY")
	}
	store, closeStore, err := OpenStore(c)
	if err != nil {
		return err
	}
	defer closeStore()
	rep, err := InspectRecord(ctx, store, ref)
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if jerr := enc.Encode(rep); jerr != nil {
			return jerr
		}
	} else if werr := WriteRecordReport(out, "", rep); werr != nil {
		return werr
	}
	if err != nil {
		return fmt.Errorf("inspect: %s: %w", ref, err)
	}
	return nil
}
