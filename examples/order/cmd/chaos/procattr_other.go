//go:build !linux

package main

import "syscall"

// childAttr puts a child in a process group of its own. Outside Linux
// there is no parent-death signal: a child outlives this command only if
// it is killed with SIGKILL.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
