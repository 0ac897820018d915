package cli

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/onceflow/onceflow/operator"
)

// WriteRecordReport prints a record's report as one line, after indent:
// what inspect and trace print.
func WriteRecordReport(out io.Writer, indent string, rep operator.RecordReport) error {
	switch {
	case rep.Corrupt != "":
		_, err := fmt.Fprintf(out, "%srecord %s: CORRUPT: %s\n", indent, Printable(rep.Key), Printable(rep.Corrupt))
		return err
	case !rep.Found:
		_, err := fmt.Fprintf(out, "%srecord %s: none (never claimed, expired, or another -key-namespace)\n", indent, Printable(rep.Key))
		return err
	}
	line := fmt.Sprintf("%srecord %s: %s attempt %d rev %d, lease left %v, TTL left %v, codec %s policy %d, response %d bytes",
		indent, Printable(rep.Key), Printable(string(rep.State)), rep.Attempt, rep.Rev, time.Duration(rep.LeaseLeft).Round(time.Millisecond),
		time.Duration(rep.TTLLeft).Round(time.Second), strconv.Quote(rep.Codec), rep.Policy, rep.Response)
	if rep.EffectUnknown {
		line += ", effect unknown"
	}
	if rep.Reason != "" {
		line += ", reason " + strconv.Quote(rep.Reason)
	}
	_, err := fmt.Fprintln(out, line)
	return err
}
