package main

import "syscall"

// childAttr puts a child in a process group of its own (a ^C at the
// terminal reaches only this command, which then stops the children in
// order) and kills it when this process dies, however it dies.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
