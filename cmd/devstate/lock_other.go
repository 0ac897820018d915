//go:build !unix

package devstate

import "errors"

// ErrLocked: another -dev worker holds the state directory.
var ErrLocked = errors.New("devstate: another -dev worker uses the state directory")

// Lock is a no-op here: nothing keeps two -dev workers off one directory.
func Lock(string) (unlock func(), err error) { return func() {}, nil }
