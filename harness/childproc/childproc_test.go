package childproc

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const envHelper = "CHILDPROC_TEST_HELPER"

// TestMain runs the helper process of TestChildDiesWithItsParent when the
// test binary is started as one.
func TestMain(m *testing.M) {
	if os.Getenv(envHelper) != "" {
		s := New()
		cmd := exec.Command("sleep", "300")
		if err := s.Start(cmd); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(cmd.Process.Pid)
		select {} // until killed
	}
	os.Exit(m.Run())
}

// A parent killed with SIGKILL takes its children with it (Linux).
func TestChildDiesWithItsParent(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux's")
	}
	t.Parallel()
	parent := exec.Command(os.Args[0], "-test.run=^$")
	parent.Env = append(os.Environ(), envHelper+"=1")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the helper printed no child: %v", err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("the helper: %q", line)
	}
	if !alive(child) {
		t.Fatalf("the child %d is not running before its parent is killed", child)
	}
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for alive(child) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(child, syscall.SIGKILL)
			t.Fatalf("the child %d outlived its parent's SIGKILL by 10 s", child)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A closed Spawner starts nothing.
func TestClosedSpawnerRefuses(t *testing.T) {
	t.Parallel()
	s := New()
	s.Close()
	s.Close() // twice is fine
	if err := s.Start(exec.Command("true")); err != ErrClosed {
		t.Fatalf("Start after Close = %v, want ErrClosed", err)
	}
}

// alive: pid runs (a zombie, dead but not yet reaped, is not alive).
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}
