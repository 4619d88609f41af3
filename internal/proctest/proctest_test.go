package proctest

import (
	"os/exec"
	"syscall"
	"testing"
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
