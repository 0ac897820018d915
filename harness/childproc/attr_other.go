//go:build unix && !linux

package childproc

import "syscall"

// childAttr puts the child in its own process group; outside Linux there
// is no parent-death signal, so a parent killed with SIGKILL leaves it.
func childAttr(given *syscall.SysProcAttr) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	if given != nil {
		a.Credential = given.Credential
	}
	return a
}
