package cli

import (
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Printable is s as the operator tools print a value read from a store
// (the ledger, Redis, a workflow's history): unchanged when it is valid
// UTF-8 of printable runes only (unicode.IsPrint), else quoted with
// strconv.Quote, so a newline cannot forge a line of output and an escape
// sequence never reaches the operator's terminal as one.
func Printable(s string) string {
	if !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// Command is how the hints the tools print name the worker's command
// name: "worker resolve", or "worker resolve -dev" for a -dev worker's
// state (dev), so that a hint copied as it is talks to the same servers.
func Command(name string, dev bool) string {
	if dev {
		return "worker " + name + " -dev"
	}
	return "worker " + name
}
