package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFatalApplyStopExitsWithItsOwnCode runs a real writd built with the
// canary_applyoverrun tag (its apply arena overruns on a value of a few
// KiB) as a one-node cluster and submits a job whose command is 3,000
// bytes. The node must not crash with a Go panic: it stops with a message
// naming the index, entry type and command ID and how to recover, and
// exits with code 3 (not 2, the configuration error code). Restarted on
// the same data directory, it stops at the same entry with the same code.
func TestFatalApplyStopExitsWithItsOwnCode(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test: skipped with -short")
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-tags", "canary_applyoverrun", "-o", bin+"/", "github.com/writ-dev/writ/cmd/writd", "github.com/writ-dev/writ/examples/jobs/cmd/writ-jobs")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	c := &cluster{t: t, bin: bin}
	p := &proc{t: t, name: "n1", host: "127.0.10.40", dir: filepath.Join(t.TempDir(), "n1")}
	c.nodes = []*proc{p}
	c.start(p)
	t.Cleanup(c.stopAll)
	c.waitReady(p, 30*time.Second)
	if _, err := submit(p, "queue.control", `{"queue":"q","action":"create"}`, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	cmd := strings.Repeat("x", 3000)
	_, _ = submit(p, "job.submit", fmt.Sprintf(`{"job_id":"big","queue":"q","priority":1,"command":%q}`, cmd), 3*time.Second)
	code := waitExit(t, p, 20*time.Second)
	log := readLog(t, p)
	if code != 3 {
		t.Fatalf("exit code %d, want 3 (fatal apply stop); log:\n%s", code, log)
	}
	for _, want := range []string{"writd: fatal apply stop at index", "EntryNormal", "slice bounds out of range", "every restart", "delete its data directory"} {
		if !strings.Contains(log, want) {
			t.Fatalf("log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains("\n"+log, "\npanic: ") {
		t.Fatalf("the process crashed with a Go panic instead of a fatal stop:\n%s", log)
	}
	// The same data directory stops again at the same entry.
	c.start(p)
	if code := waitExit(t, p, 30*time.Second); code != 3 {
		t.Fatalf("restart: exit code %d, want 3; log:\n%s", code, readLog(t, p))
	}
	// Offline recovery: refused without --yes, then the entry is applied
	// as empty and the node serves again.
	var idx uint64
	if _, err := fmt.Sscanf(log[strings.Index(log, "writd: fatal apply stop at index "):], "writd: fatal apply stop at index %d", &idx); err != nil {
		t.Fatal(err)
	}
	runRecover := func(extra ...string) (int, string) {
		cmd := exec.Command(filepath.Join(bin, "writd"), append([]string{"recover", "--data-dir", p.dir, "--skip-index", fmt.Sprint(idx)}, extra...)...)
		cmd.Env = cleanEnv()
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(out)
		}
		return 0, string(out)
	}
	if code, out := runRecover(); code != 2 || !strings.Contains(out, "pass --yes") {
		t.Fatalf("recover without --yes: exit %d: %s", code, out)
	}
	if code, out := runRecover("--yes"); code != 0 || !strings.Contains(out, "WARNING") {
		t.Fatalf("recover: exit %d: %s", code, out)
	}
	c.start(p)
	c.waitReady(p, 30*time.Second)
	r, err := submit(p, "job.submit", `{"job_id":"small","queue":"q","priority":1,"command":"x"}`, 5*time.Second)
	if err != nil || r.Outcome.String() != "COMMITTED" {
		t.Fatalf("submit after recovery: %v %v", r, err)
	}
}

func waitExit(t *testing.T, p *proc, d time.Duration) int {
	t.Helper()
	select {
	case <-p.exited():
	case <-time.After(d):
		t.Fatalf("%s still running %v after the entry it cannot apply", p.name, d)
	}
	return p.exitCode()
}

func readLog(t *testing.T, p *proc) string {
	t.Helper()
	b, err := os.ReadFile(p.dir + ".log")
	if err != nil {
		t.Fatal(err)
	}
	return string(bytes.TrimSpace(b))
}
