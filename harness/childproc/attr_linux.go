package childproc

import "syscall"

// childAttr puts the child in its own process group (a terminal's Ctrl-C
// reaches only the parent, which stops it in order) and has the kernel
// SIGKILL it when its parent's thread exits; it keeps the Credential of
// given (a child run as another user).
func childAttr(given *syscall.SysProcAttr) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if given != nil {
		a.Credential = given.Credential
	}
	return a
}
