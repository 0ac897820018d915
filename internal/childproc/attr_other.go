//go:build unix && !linux

package childproc

import "syscall"

// childAttr puts the child in its own process group; outside Linux there
// is no parent-death signal, so a parent killed with SIGKILL leaves it.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
