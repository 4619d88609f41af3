package proctest

import (
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestStoppedTellsRunningFromStopped: a running sleep is not stopped; after
// SIGSTOP it is, and after SIGCONT it is not again.
func TestStoppedTellsRunningFromStopped(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep: %v", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	if ok, err := Stopped(pid); err != nil || ok {
		t.Fatalf("running process: stopped=%v err=%v", ok, err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	WaitStopped(t, pid)
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		if ok, _ := Stopped(pid); !ok {
			return
		}
	}
	t.Fatal("still stopped after SIGCONT")
}

// TestLoadRunsEveryWorkerUntilStop: each worker counts up from 0 in order,
// Stop returns only after every worker has, and a second Stop is harmless.
func TestLoadRunsEveryWorkerUntilStop(t *testing.T) {
	var mu sync.Mutex
	next := map[int]int{}
	l := StartLoad(3, func(w, i int) {
		mu.Lock()
		defer mu.Unlock()
		if next[w] != i {
			t.Errorf("worker %d: op %d after %d", w, i, next[w]-1)
		}
		next[w] = i + 1
	})
	WaitFor(t, 10*time.Second, "every worker ran", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(next) == 3 && next[0] > 0 && next[1] > 0 && next[2] > 0
	})
	l.Stop()
	mu.Lock()
	after := next[0] + next[1] + next[2]
	mu.Unlock()
	time.Sleep(20 * time.Millisecond)
	l.Stop()
	mu.Lock()
	defer mu.Unlock()
	if n := next[0] + next[1] + next[2]; n != after {
		t.Fatalf("workers ran on after Stop: %d ops, then %d", after, n)
	}
}
