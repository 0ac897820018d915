package onceflow_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/onceflow/onceflow"
)

// TestNULIsRefusedInOperationIDsAndReasons: the schema refuses a NUL byte
// in a stored op or reason, so Validate refuses one in a request before
// anything is sent.
func TestNULIsRefusedInOperationIDsAndReasons(t *testing.T) {
	t.Parallel()
	var ve *onceflow.Error
	for _, id := range []onceflow.OperationID{"\x00", "op\x00", "a\x00b"} {
		if err := id.Validate(); !errors.Is(err, onceflow.OutcomeInvalid) || !errors.As(err, &ve) || ve.Field != "OperationID" {
			t.Errorf("OperationID %q: %v, want an OutcomeInvalid error", id, err)
		}
	}
	if err := onceflow.OperationID("op-1/ok é").Validate(); err != nil {
		t.Errorf("a valid OperationID: %v", err)
	}
	for _, r := range []string{"\x00", "declined\x00", strings.Repeat("r", onceflow.MaxReasonLen+1)} {
		if err := onceflow.ValidateReason(r); !errors.As(err, &ve) || ve.Field != "Reason" {
			t.Errorf("reason %.20q: %v, want an OutcomeInvalid error", r, err)
		}
	}
	for _, r := range []string{"", "declined", strings.Repeat("r", onceflow.MaxReasonLen), "\xff"} {
		if err := onceflow.ValidateReason(r); err != nil {
			t.Errorf("reason %.20q: %v", r, err)
		}
	}
}

// TestSanitizeReason: NUL bytes and invalid UTF-8 become U+FFFD, long
// text is cut on a rune boundary and ends in "...", and valid text is
// kept as it is.
func TestSanitizeReason(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", onceflow.MaxReasonLen) // 2 bytes a rune: cut mid-rune at any odd offset
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"card declined", "card declined"},
		{"card\x00declined", "card\uFFFDdeclined"},
		{"\x00", "\uFFFD"},
		{"bad \xff utf-8", "bad \uFFFD utf-8"},
		{strings.Repeat("r", onceflow.MaxReasonLen), strings.Repeat("r", onceflow.MaxReasonLen)},
		{strings.Repeat("r", onceflow.MaxReasonLen+1), strings.Repeat("r", onceflow.MaxReasonLen-3) + "..."},
		{long, strings.Repeat("é", (onceflow.MaxReasonLen-3)/2) + "..."},
		{strings.Repeat("\x00", onceflow.MaxReasonLen), strings.Repeat("\uFFFD", (onceflow.MaxReasonLen-3)/3) + "..."},
	} {
		got := onceflow.SanitizeReason(c.in)
		if got != c.want {
			t.Errorf("SanitizeReason(%.20q) = %.40q (%d bytes), want %.40q (%d bytes)", c.in, got, len(got), c.want, len(c.want))
		}
		checkSanitized(t, c.in, got)
	}
}

func checkSanitized(t *testing.T, in, got string) {
	t.Helper()
	if err := onceflow.ValidateReason(got); err != nil {
		t.Errorf("SanitizeReason(%.20q) = %.20q, which is refused: %v", in, got, err)
	}
	if !utf8.ValidString(got) {
		t.Errorf("SanitizeReason(%.20q) = %.20q, not valid UTF-8", in, got)
	}
	if (in == "") != (got == "") {
		t.Errorf("SanitizeReason(%.20q) = %.20q: a reason appeared or vanished", in, got)
	}
	if onceflow.SanitizeReason(got) != got {
		t.Errorf("SanitizeReason(%.20q) = %.20q is not kept as it is", in, got)
	}
}

// FuzzSanitizeReason: whatever an action's error says, the sanitised
// reason is one the store records (no NUL, at most MaxReasonLen bytes),
// valid UTF-8, and kept as it is by a second pass.
func FuzzSanitizeReason(f *testing.F) {
	for _, s := range []string{"", "x", "\x00", "a\x00b", "\xff\xfe", strings.Repeat("é", 600), strings.Repeat("\x00", 1100), strings.Repeat("€", 400) + "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkSanitized(t, s, onceflow.SanitizeReason(s))
	})
}
