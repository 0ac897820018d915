//go:build !unix

package childproc

import "syscall"

// childAttr: no process group and no parent-death signal here.
func childAttr() *syscall.SysProcAttr { return nil }
