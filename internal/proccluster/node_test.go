package proccluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// sh is a node whose "writd" is /bin/sh running script (real processes,
// real signals; the writd side is covered by the callers' tests).
func sh(t *testing.T, name string) (*Node, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	return NewNode(name, dir, "127.0.60.1:0", "127.0.60.1:0", "127.0.60.1:0"), "/bin/sh"
}

// TestNodeLifecycleRealProcess: a started node logs to Dir.log, gets the
// cleaned environment plus Spec.Env, and reports each exit: its code,
// whether the caller asked for it, and OnExit before Done.
func TestNodeLifecycleRealProcess(t *testing.T) {
	t.Setenv("WRIT_LOG_LEVEL", "debug") // a node setting: must not reach the child
	n, bin := sh(t, "n1")
	var mu sync.Mutex
	var exits []Exit
	onExit := func(e Exit) { mu.Lock(); exits = append(exits, e); mu.Unlock() }
	spec := Spec{Bin: bin, Args: []string{"-c", `echo "level=$WRIT_LOG_LEVEL extra=$EXTRA"; exit 7`}, Env: []string{"EXTRA=x"}, OnExit: onExit}
	if err := n.Start(spec); err != nil {
		t.Fatal(err)
	}
	<-n.Done()
	mu.Lock()
	got := append([]Exit(nil), exits...)
	mu.Unlock()
	if len(got) != 1 || got[0].Code != 7 || got[0].Expected {
		t.Fatalf("exits seen before Done: %+v, want one unexpected exit 7", got)
	}
	if n.Running() || n.ExitCode() != 7 || !n.ExitedOnItsOwn() {
		t.Fatalf("after exit: running=%t code=%d onItsOwn=%t", n.Running(), n.ExitCode(), n.ExitedOnItsOwn())
	}
	if tail := strings.Join(n.LogTail(5), "\n"); tail != "level= extra=x" {
		t.Fatalf("log %q: want the cleaned environment plus Spec.Env", tail)
	}

	// A long-running process: SIGSTOP/SIGCONT pause and resume it; Kill
	// ends it and the exit is expected.
	spec.Args = []string{"-c", "echo started; exec sleep 300"}
	if err := n.Start(spec); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(spec); err == nil {
		t.Fatal("a second Start of a running node succeeded")
	}
	waitLog(t, n, "started")
	if err := n.Signal(syscall.SIGSTOP); err != nil || !n.Paused() || n.Up() {
		t.Fatalf("SIGSTOP: %v paused=%t up=%t", err, n.Paused(), n.Up())
	}
	if err := n.Signal(syscall.SIGCONT); err != nil || n.Paused() || !n.Up() {
		t.Fatalf("SIGCONT: %v paused=%t up=%t", err, n.Paused(), n.Up())
	}
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	if n.Running() || n.ExitedOnItsOwn() || n.ExitCode() != -1 {
		t.Fatalf("after Kill: running=%t onItsOwn=%t code=%d", n.Running(), n.ExitedOnItsOwn(), n.ExitCode())
	}
	if err := n.Kill(); err == nil {
		t.Fatal("Kill of a stopped node reported no error")
	}
	if b, _ := os.ReadFile(n.Log); !strings.Contains(string(b), "extra=x\nstarted\n") {
		t.Fatalf("log %q: want both runs appended", b)
	}

	// Stop: a paused process is resumed, then SIGINT; one that ignores
	// SIGINT is killed after the grace period.
	spec.Args = []string{"-c", `trap "" INT; echo trapped; while :; do sleep 0.05; done`}
	if err := n.Start(spec); err != nil {
		t.Fatal(err)
	}
	waitLog(t, n, "trapped")
	_ = n.Signal(syscall.SIGSTOP)
	start := time.Now()
	killed, err := n.Stop(300 * time.Millisecond)
	if err != nil || !killed || n.Running() || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("Stop of a process ignoring SIGINT: killed=%t err=%v running=%t after %s", killed, err, n.Running(), time.Since(start))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(exits) != 3 || !exits[1].Expected || !exits[2].Expected {
		t.Fatalf("exits %+v: want the kill and the stop expected", exits)
	}
}

// TestWaitReadyFailsWhenTheProcessExits: a node whose process is gone
// fails WaitReady at once, naming it, instead of polling until the
// deadline; WhileDown may restart it instead.
func TestWaitReadyFailsWhenTheProcessExits(t *testing.T) {
	n, bin := sh(t, "n1")
	if _, err := n.Dial(); err == nil {
		t.Fatal("Dial without transport credentials succeeded")
	}
	if err := n.Start(Spec{Bin: bin, Args: []string{"-c", "exit 2"}}); err != nil {
		t.Fatal(err)
	}
	<-n.Done()
	c := &Cluster{Nodes: []*Node{n}}
	start := time.Now()
	err := c.WaitReady(context.Background(), n, time.Minute)
	if err == nil || !strings.Contains(err.Error(), "n1 exited") || time.Since(start) > 5*time.Second {
		t.Fatalf("WaitReady of an exited node: %v after %s", err, time.Since(start))
	}
	restarts := 0
	c.WhileDown = func(*Node) error { restarts++; return nil }
	if err := c.WaitReady(context.Background(), n, 300*time.Millisecond); err == nil || restarts == 0 {
		t.Fatalf("with WhileDown: %v, %d calls", err, restarts)
	}
}

func TestJoinFlags(t *testing.T) {
	if got := strings.Join(JoinFlags("h:1"), " "); got != "--join h:1 --insecure" {
		t.Errorf("JoinFlags = %q", got)
	}
	if got := strings.Join(JoinFlags("h:1", nil, []string{"--insecure"}), " "); got != "--join h:1" {
		t.Errorf("JoinFlags with the caller's --insecure = %q", got)
	}
	if _, err := PluginFlags(filepath.Join(t.TempDir(), "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("PluginFlags of a missing plugin: %v", err)
	}
}

// waitLog waits until the last line of n's log is line.
func waitLog(t *testing.T, n *Node, line string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); strings.Join(n.LogTail(1), "") != line; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not log %q within 10s", n.Name, line)
		}
	}
}
