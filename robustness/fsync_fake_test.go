package robustness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFsyncCheck_FakeFaults: check fsync-error-stops fails on a fact the
// failing process answered RECEIVED after the failure began, on a node
// that kept running and on a node that exited with another code, and
// passes on the same history without them.
func TestFsyncCheck_FakeFaults(t *testing.T) {
	rec := FsyncFault{Node: "n2", Inject: "error=EIO", Attached: 100, Restarted: 200, Tampered: 3, Stopped: true, ExitCode: writdExitFatal}
	ok := []Fault{{Kind: FailFsync, Nodes: []string{"n2"}, Fsync: &rec}, {Kind: SlowFsync, Nodes: []string{"n1"}, Fsync: &FsyncFault{Node: "n1", Tampered: 9}}}
	ops := []Op{
		{Kind: "report", Node: "n2", ID: "before", Outcome: outReceived, Start: 90, End: 99},      // acknowledged before the failure
		{Kind: "report", Node: "n2", ID: "refused", Outcome: "UNAVAILABLE", Start: 110, End: 120}, // refused: right
		{Kind: "report", Node: "n1", ID: "other", Outcome: outReceived, Start: 110, End: 120},     // another node
		{Kind: "report", Node: "n2", ID: "restarted", Outcome: outReceived, Start: 150, End: 210}, // may be the new process
		{Kind: "report", Node: "n2", ID: "before", Outcome: outReceived, Start: 130, End: 140},    // a duplicate of one durable before
	}
	if r := checkFsync(ok, ops); !r.Pass || r.Cases != 1 {
		t.Fatalf("a node that stopped and acknowledged nothing after the failure failed: %+v", r)
	}
	lie := append(ops, Op{Kind: "report", Node: "n2", ID: "lie", Outcome: outReceived, Start: 130, End: 140})
	if r := checkFsync(ok, lie); r.Pass || !strings.Contains(r.Detail[0], "fact lie RECEIVED") {
		t.Fatalf("a fact acknowledged without fsync passed: %+v", r)
	}
	running := rec
	running.Stopped, running.ExitCode = false, 0
	if r := checkFsync([]Fault{{Kind: FailFsync, Fsync: &running}}, ops); r.Pass || !strings.Contains(r.Detail[0], "kept running") {
		t.Fatalf("a node that kept running passed: %+v", r)
	}
	crashed := rec
	crashed.ExitCode = 2
	if r := checkFsync([]Fault{{Kind: FailFsync, Fsync: &crashed}}, ops); r.Pass || !strings.Contains(r.Detail[0], "exited with code 2") {
		t.Fatalf("a node that exited with another code passed: %+v", r)
	}
	// A fault that failed no fsync is faults-injected's, not a case here.
	none := rec
	none.Tampered = 0
	if r := checkFsync([]Fault{{Kind: FailFsync, Fsync: &none}}, lie); !r.Pass || r.Cases != 0 {
		t.Fatalf("a fault that failed nothing was checked: %+v", r)
	}
}

// TestDropUnsynced cuts only what was appended after the failure began.
func TestDropUnsynced(t *testing.T) {
	p := filepath.Join(t.TempDir(), "outbox.log")
	if err := os.WriteFile(p, []byte("synced|unsynced"), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := dropUnsynced(p, 6); err != nil || n != 9 {
		t.Fatalf("dropped %d, %v", n, err)
	}
	if b, _ := os.ReadFile(p); string(b) != "synced" {
		t.Fatalf("left %q", b)
	}
	// A file that did not grow, or whose size was unknown, is left alone.
	for _, synced := range []int64{6, 10, -1} {
		if n, err := dropUnsynced(p, synced); err != nil || n != 0 {
			t.Fatalf("synced %d: dropped %d, %v", synced, n, err)
		}
	}
}
