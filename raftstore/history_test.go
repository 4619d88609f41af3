package raftstore

import (
	"path/filepath"
	"testing"

	"github.com/writ-dev/writ/kv"
)

// TestReadAppliedAfterRestart: the entries a restarted node's WAL holds are
// read back with each command's apply decision rebuilt from the outcome
// table — applied, duplicate, and an attempt that was decided again later.
// One node on 127.0.41.31.
func TestReadAppliedAfterRestart(t *testing.T) {
	cfg := Config{NodeID: "n1", DataDir: filepath.Join(t.TempDir(), "n1"), Listener: listen(t, "127.0.41.31"), Logger: testLogger(t)}
	cfg.RaftAddr = cfg.Listener.Addr().String()
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a := mustPropose(t, n, put("a", "k/a", "1"))[0]
	dup := mustPropose(t, n, put("a", "k/a", "2"))[0]
	bad := kv.Command{ID: "c", Type: "test.put", Origin: "test", Effect: kv.Effect{Writes: []kv.Write{{Key: "k/a", Value: []byte("3"), IfRev: 999}}}}
	conflict := mustPropose(t, n, bad)[0]
	bad.Effect.Writes[0].IfRev = a.Index
	retried := mustPropose(t, n, bad)[0]
	if a.Status != kv.StatusApplied || dup.Status != kv.StatusDuplicate || conflict.Status != kv.StatusConflict || retried.Status != kv.StatusApplied {
		t.Fatalf("setup: %v %v %v %v", a, dup, conflict, retried)
	}
	n.Stop()
	cfg.Listener = nil
	n, err = Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	ents, first, next, err := n.ReadApplied(1, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if first != 1 || next <= retried.Index {
		t.Fatalf("first %d next %d, want 1 and > %d", first, next, retried.Index)
	}
	got := map[uint64]kv.Result{}
	for _, e := range ents {
		if len(e.Commands) != 1 || len(e.Results) != 1 {
			t.Fatalf("index %d: %d commands %d results", e.Index, len(e.Commands), len(e.Results))
		}
		got[e.Index] = e.Results[0]
	}
	for _, w := range []struct {
		idx   uint64
		st    kv.Status
		first uint64
	}{{a.Index, kv.StatusApplied, 0}, {dup.Index, kv.StatusDuplicate, a.Index}, {conflict.Index, kv.StatusConflict, 0}, {retried.Index, kv.StatusApplied, 0}} {
		r, ok := got[w.idx]
		if !ok || r.Status != w.st || r.FirstIndex != w.first || r.Index != w.idx {
			t.Errorf("index %d read back as %+v (present %v), want status %v first %d", w.idx, r, ok, w.st, w.first)
		}
	}
	if ents, _, _, err := n.ReadApplied(retried.Index+1000, 1<<20); err != nil || len(ents) != 0 {
		t.Fatalf("beyond the applied index: %v %v", ents, err)
	}
}

// TestReadAppliedSameIDTwiceInOneEntry: when one entry carries the same
// command ID more than once, apply decides the first copy and answers the
// later ones duplicate (or fenced). Read back from the log after a restart,
// each copy must get the decision apply made, not the outcome table's one
// record for the ID at this index twice: a watcher resumed from the log
// would count the application twice. The first shape is the same fact
// logged twice in one batch; the second a copy that did not apply (its
// precondition failed) before one with the same ID that did. One node on
// 127.0.41.32.
func TestReadAppliedSameIDTwiceInOneEntry(t *testing.T) {
	cfg := Config{NodeID: "n1", DataDir: filepath.Join(t.TempDir(), "n1"), Listener: listen(t, "127.0.41.32"), Logger: testLogger(t)}
	cfg.RaftAddr = cfg.Listener.Addr().String()
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	twice := mustPropose(t, n, put("f", "k/f", "1"), put("g", "k/g", "1"), put("f", "k/f", "1"))
	conflicting := kv.Command{ID: "h", Type: "test.put", Origin: "test", Payload: []byte("x"), Effect: kv.Effect{Writes: []kv.Write{{Key: "k/h", Value: []byte("1"), IfRev: 999}}}}
	applying := put("h", "k/h", "2")
	applying.Payload = []byte("y")
	second := mustPropose(t, n, conflicting, applying, applying)
	fenced := mustPropose(t, n, kv.Command{ID: "i", Type: kv.TypeFence, Origin: "test"}, put("i", "k/i", "1"))
	live := [][]kv.Result{twice, second, fenced}
	want := [][]kv.Status{
		{kv.StatusApplied, kv.StatusApplied, kv.StatusDuplicate},
		{kv.StatusConflict, kv.StatusApplied, kv.StatusDuplicate},
		{kv.StatusFenced, kv.StatusFenced},
	}
	for i := range live {
		for j, r := range live[i] {
			if r.Status != want[i][j] {
				t.Fatalf("setup: batch %d command %d applied as %v, want %v", i, j, r.Status, want[i][j])
			}
		}
	}
	n.Stop()
	cfg.Listener = nil
	if n, err = Start(cfg); err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	ents, _, _, err := n.ReadApplied(1, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	byIndex := map[uint64][]kv.Result{}
	for _, e := range ents {
		byIndex[e.Index] = e.Results
	}
	for i := range live {
		idx := live[i][0].Index
		got := byIndex[idx]
		if len(got) != len(live[i]) {
			t.Fatalf("index %d: %d results read back, want %d", idx, len(got), len(live[i]))
		}
		for j, r := range got {
			if r.Status != want[i][j] {
				t.Errorf("index %d command %d read back as %v (%s), apply decided %v", idx, j, r.Status, r.Reason, want[i][j])
			}
			if want[i][j] == kv.StatusDuplicate && r.FirstIndex != idx {
				t.Errorf("index %d command %d: duplicate of index %d, want %d", idx, j, r.FirstIndex, idx)
			}
		}
	}
}
