//go:build nodev

package main

import "testing"

// The console's address printed at startup is one a browser on the
// machine opens: a worker listening on every interface is shown as
// localhost (which the console answers under -dev too).
func TestConsoleURL(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"127.0.0.1:8080": "http://127.0.0.1:8080/console",
		"0.0.0.0:8080":   "http://localhost:8080/console",
		"[::]:9000":      "http://localhost:9000/console",
		":8080":          "http://localhost:8080/console",
		"[::1]:8080":     "http://[::1]:8080/console",
		"ops.example:80": "http://ops.example:80/console",
	} {
		if got := consoleURL(addr); got != want {
			t.Errorf("consoleURL(%q) = %q, want %q", addr, got, want)
		}
	}
}
