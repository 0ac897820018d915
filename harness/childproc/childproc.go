// Package childproc starts child processes that die with their parent:
// on Linux each gets the parent-death signal SIGKILL, so a worker that is
// killed (even with SIGKILL) leaves no redis-server or Temporal server
// behind. Elsewhere the children are only put in their own process group.
//
// Linux sends the parent-death signal when the thread that forked the
// child exits, not the process, and the Go runtime may retire threads; so
// every child is started from one goroutine locked to its OS thread for
// the life of the Spawner.
package childproc

import (
	"errors"
	"os/exec"
	"runtime"
	"sync"
)

// ErrClosed: the Spawner was closed.
var ErrClosed = errors.New("childproc: the spawner is closed: no new processes")

// Spawner starts child processes from one locked OS thread.
type Spawner struct {
	reqs chan request
	quit chan struct{} // closed by Close
	done chan struct{} // closed when the thread's goroutine ends
	once sync.Once
}

type request struct {
	cmd *exec.Cmd
	err chan error
}

// New starts a Spawner's thread.
func New() *Spawner {
	s := &Spawner{reqs: make(chan request), quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: when the goroutine ends its thread exits, and
		// with it go the children it started.
		defer close(s.done)
		for {
			select {
			case r := <-s.reqs:
				r.err <- r.cmd.Start()
			case <-s.quit:
				return
			}
		}
	}()
	return s
}

// Start starts cmd (as exec.Cmd.Start) with the parent-death signal set,
// in a process group of its own. Of cmd.SysProcAttr it keeps only the
// Credential (on Unix): a child run as another user.
func (s *Spawner) Start(cmd *exec.Cmd) error {
	cmd.SysProcAttr = childAttr(cmd.SysProcAttr)
	r := request{cmd: cmd, err: make(chan error, 1)}
	select {
	case s.reqs <- r:
	case <-s.done:
		return ErrClosed
	}
	return <-r.err
}

// Close ends the Spawner's thread, which kills (on Linux) every child it
// started that is still running. Stop them first to stop them gracefully.
func (s *Spawner) Close() {
	s.once.Do(func() { close(s.quit) })
	<-s.done
}
