package robustness

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAttachStraceFailsAndDelaysFsync: strace attached to a running shell
// fails the fsyncs of the dd processes it starts afterwards with EIO (so
// -f follows children and the injection is in force once attachStrace
// returns), and a delay injection is counted as DELAYED.
func TestAttachStraceFailsAndDelaysFsync(t *testing.T) {
	if err := straceAvailable(); err != nil {
		if os.Geteuid() == 0 {
			t.Fatal(err)
		}
		t.Skipf("strace NOT RUN: %v", err)
	}
	for _, c := range []struct{ inject, marker, want string }{
		{"error=EIO", "(INJECTED)", "Input/output error"},
		{"delay_enter=1000us", "(DELAYED)", ""},
	} {
		dir := scratchDir(t)
		errs := filepath.Join(dir, "dd.err")
		sh := exec.Command("sh", "-c", `while :; do dd if=/dev/zero of=`+filepath.Join(dir, "f")+` bs=1 count=1 conv=fsync 2>>`+errs+`; sleep 0.02; done`)
		// its own process group: killing the shell alone left a dd
		// writing into dir while the test removed it
		sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := sh.Start(); err != nil {
			t.Fatal(err)
		}
		killGroup := func() { _ = syscall.Kill(-sh.Process.Pid, syscall.SIGKILL); _ = sh.Wait() }
		tr, err := attachStrace(context.Background(), sh.Process.Pid, filepath.Join(dir, "strace.log"), c.inject)
		if err != nil {
			killGroup()
			t.Fatal(err)
		}
		_ = os.WriteFile(errs, nil, 0o600) // what dd said before the attach
		err = poll(context.Background(), 30*time.Second, func() (bool, string) {
			b, _ := os.ReadFile(errs)
			return tr.count(c.marker) > 0 && strings.Contains(string(b), c.want), string(b)
		})
		_ = tr.stop(10 * time.Second)
		killGroup()
		if err != nil {
			t.Fatalf("%s: no fsync tampered with: %v", c.inject, err)
		}
	}
}

// scratchDir is a temporary directory removed when t ends, retrying for up
// to 5 s: a SIGKILLed process may finish the write it was in (a file
// created in the directory) after the kill returned.
func scratchDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "writ-strace-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			err := os.RemoveAll(dir)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("remove %s: %v", dir, err)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	return dir
}
