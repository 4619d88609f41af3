package robustness

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
		dir := t.TempDir()
		errs := filepath.Join(dir, "dd.err")
		sh := exec.Command("sh", "-c", `while :; do dd if=/dev/zero of=`+filepath.Join(dir, "f")+` bs=1 count=1 conv=fsync 2>>`+errs+`; sleep 0.02; done`)
		if err := sh.Start(); err != nil {
			t.Fatal(err)
		}
		tr, err := attachStrace(context.Background(), sh.Process.Pid, filepath.Join(dir, "strace.log"), c.inject)
		if err != nil {
			_ = sh.Process.Kill()
			t.Fatal(err)
		}
		_ = os.WriteFile(errs, nil, 0o600) // what dd said before the attach
		err = poll(context.Background(), 30*time.Second, func() (bool, string) {
			b, _ := os.ReadFile(errs)
			return tr.count(c.marker) > 0 && strings.Contains(string(b), c.want), string(b)
		})
		_ = tr.stop(10 * time.Second)
		_ = sh.Process.Kill()
		_ = sh.Wait()
		if err != nil {
			t.Fatalf("%s: no fsync tampered with: %v", c.inject, err)
		}
	}
}
