package childproc

import "syscall"

// childAttr puts the child in its own process group (a terminal's Ctrl-C
// reaches only the parent, which stops it in order) and has the kernel
// SIGKILL it when its parent's thread exits.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
