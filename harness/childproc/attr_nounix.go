//go:build !unix

package childproc

import "syscall"

// childAttr: no process group, no parent-death signal and no Credential
// here.
func childAttr(*syscall.SysProcAttr) *syscall.SysProcAttr { return nil }
