package raftstore

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"pgregory.net/rapid"

	"github.com/writ-dev/writ/kv"
)

// fenceModel is what the outcome table must say about one command ID.
type fenceModel struct {
	applied, fenced bool
	index, digest   uint64
}

// fenceOp is one command of a generated history: an attempt (a write of
// its ID's key with one of two payloads) or a fence.
type fenceOp struct {
	id      string
	fence   bool
	payload string
}

func (o fenceOp) command() kv.Command {
	if o.fence {
		return kv.Command{ID: o.id, Type: kv.TypeFence, Origin: "n2"}
	}
	return kv.Command{ID: o.id, Type: "t.write", Payload: []byte(o.payload), Origin: "n1",
		Effect: kv.Effect{Writes: []kv.Write{{Key: "k/" + o.id, Value: []byte(o.payload), Unconditional: true}}}}
}

// expect is the model's apply decision for op at index, and the model
// after it.
func expect(m fenceModel, op fenceOp, index uint64) (kv.Result, fenceModel) {
	switch {
	case m.applied:
		return kv.Result{Index: index, Status: kv.StatusDuplicate, FirstIndex: m.index, Digest: m.digest}, m
	case m.fenced:
		return kv.Result{Index: index, Status: kv.StatusFenced, FirstIndex: m.index}, m
	case op.fence:
		return kv.Result{Index: index, Status: kv.StatusFenced, FirstIndex: index}, fenceModel{fenced: true, index: index}
	}
	d := kv.PayloadDigest([]byte(op.payload))
	return kv.Result{Index: index, Status: kv.StatusApplied, Digest: d}, fenceModel{applied: true, index: index, digest: d}
}

func applyOne(t interface{ Fatalf(string, ...any) }, s *stateDB, index uint64, op fenceOp) kv.Result {
	var res []kv.Result
	err := s.apply(1, func(a *applyTx) error {
		var err error
		res, err = a.applyCommands(index, []kv.Command{op.command()}, nil)
		if err != nil {
			return err
		}
		return a.finish()
	})
	if err != nil {
		t.Fatalf("apply %d %+v: %v", index, op, err)
	}
	return res[0]
}

func restoredCopy(t interface{ Fatalf(string, ...any) }, s *stateDB, path string) *stateDB {
	if err := s.flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	var data []byte
	if err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		data, err = snapshotData(tx)
		return err
	}); err != nil {
		t.Fatalf("snapshot data: %v", err)
	}
	r, err := openState(path, 0)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if _, _, err := r.restore(data); err != nil {
		t.Fatalf("restore: %v", err)
	}
	return r
}

// TestFenceAgainstLateCommitProperty applies random histories of attempts
// (two payloads) and fences over a few IDs, in every order, to a real
// state database, and checks each apply decision against the model: the
// first of attempt and fence in the log wins, for good; a command with a
// fenced ID changes nothing; a duplicate names the first application's
// digest. Midway the state is shipped as a snapshot and restored into a
// second database, and the rest of the history is applied to both: their
// decisions and state hashes must be equal (a snapshot carries fences).
// Applying the whole history to a third, fresh database (replay, W9)
// yields the same hash.
func TestFenceAgainstLateCommitProperty(t *testing.T) {
	dir := t.TempDir()
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		ids := []string{"a", "b", "c"}
		ops := rapid.SliceOfN(rapid.Custom(func(rt *rapid.T) fenceOp {
			return fenceOp{
				id:      rapid.SampledFrom(ids).Draw(rt, "id"),
				fence:   rapid.Bool().Draw(rt, "fence"),
				payload: rapid.SampledFrom([]string{"P", "Q"}).Draw(rt, "payload"),
			}
		}), 1, 24).Draw(rt, "ops")
		cut := rapid.IntRange(0, len(ops)).Draw(rt, "snapshot at")
		s, err := openState(filepath.Join(dir, fmt.Sprintf("s%d.db", run)), 0)
		if err != nil {
			rt.Fatalf("open: %v", err)
		}
		defer s.close()
		var r *stateDB
		model := map[string]fenceModel{}
		for i, op := range ops {
			index := uint64(i + 1)
			if i == cut {
				r = restoredCopy(rt, s, filepath.Join(dir, fmt.Sprintf("r%d.db", run)))
				defer r.close()
			}
			want, next := expect(model[op.id], op, index)
			got := applyOne(rt, s, index, op)
			got.Reason = ""
			if got != want {
				rt.Fatalf("op %d %+v: apply decided %+v, the model %+v", i, op, got, want)
			}
			if r != nil {
				if got2 := applyOne(rt, r, index, op); got2.Status != want.Status || got2.FirstIndex != want.FirstIndex {
					rt.Fatalf("op %d %+v on the restored copy: %+v, want %+v", i, op, got2, want)
				}
			}
			model[op.id] = next
		}
		for _, id := range ids {
			m := model[id]
			rec, ok := s.outcome(id)
			v, hasKey, _ := s.get("k/" + id)
			switch {
			case m.applied:
				if !ok || rec.Status != kv.StatusApplied || rec.Index != m.index || rec.Digest != m.digest || !hasKey {
					rt.Fatalf("%s: want applied at %d, have %v %+v (key %v)", id, m.index, ok, rec, hasKey)
				}
			case m.fenced:
				if !ok || rec.Status != kv.StatusFenced || rec.Index != m.index || hasKey {
					rt.Fatalf("%s: want fenced at %d and no key, have %v %+v key %v %q", id, m.index, ok, rec, hasKey, v.Value)
				}
			default:
				if ok || hasKey {
					rt.Fatalf("%s: never proposed, have %+v", id, rec)
				}
			}
		}
		_, sum, err := s.hash()
		if err != nil {
			rt.Fatalf("hash: %v", err)
		}
		if r != nil {
			if _, sum2, _ := r.hash(); sum2 != sum {
				rt.Fatal("the restored copy's state differs after the same entries")
			}
		}
		f, err := openState(filepath.Join(dir, fmt.Sprintf("f%d.db", run)), 0)
		if err != nil {
			rt.Fatalf("open: %v", err)
		}
		defer f.close()
		for i, op := range ops {
			applyOne(rt, f, uint64(i+1), op)
		}
		if _, sum3, _ := f.hash(); sum3 != sum {
			rt.Fatal("replaying the history yields another state")
		}
	})
}

// TestOutcomeRecordsWithoutDigestStillDecode: records written before
// digests existed (17 bytes, then the reason) decode as before.
func TestOutcomeRecordsWithoutDigestStillDecode(t *testing.T) {
	old := []byte{0, 0, 0, 0, 0, 0, 0, 7, byte(kv.StatusApplied), 0, 0, 0, 0, 0, 0, 0, 0}
	r, ok := decodeOutcome(append(old, "why"...))
	if !ok || r.Index != 7 || r.Status != kv.StatusApplied || r.Reason != "why" || r.Digest != 0 {
		t.Fatalf("old record: %v %+v", ok, r)
	}
	want := kv.Result{Index: 9, Status: kv.StatusFenced, FirstIndex: 9, Digest: 42, Verdict: 3, Reason: "r"}
	if got, ok := decodeOutcome(appendOutcome(nil, want)); !ok || got != want {
		t.Fatalf("round trip: %v %+v", ok, got)
	}
}

// TestFenceDecidesAlikeOnEveryReplica runs a real three-node cluster on
// 127.0.40.1–3: an attempt before its fence commits, an attempt after its
// fence applies as nothing, and a follower that catches up by snapshot
// holds the same fence and refuses a late attempt the same way.
func TestFenceDecidesAlikeOnEveryReplica(t *testing.T) {
	c := newClusterOn(t, "127.0.40", 3, func(_ int, cfg *Config) {
		cfg.SnapshotCount = 20
		cfg.SnapshotCatchUp = 5
	})
	li := c.leader(10 * time.Second)
	other := (li + 1) % 3
	fence := func(id string) kv.Command { return kv.Command{ID: id, Type: kv.TypeFence, Origin: "test"} }

	// Attempt first: the fence is a duplicate.
	mustPropose(t, c.nodes[li], put("a", "k/a", "v"))
	if r := mustPropose(t, c.nodes[other], fence("a")); r[0].Status != kv.StatusDuplicate {
		t.Fatalf("fence after the attempt: want duplicate, have %+v", r[0])
	}
	// Fence first: the attempt is fenced and changes nothing.
	if r := mustPropose(t, c.nodes[other], fence("b")); r[0].Status != kv.StatusFenced {
		t.Fatalf("fence: want fenced, have %+v", r[0])
	}
	if r := mustPropose(t, c.nodes[li], put("b", "k/b", "v")); r[0].Status != kv.StatusFenced {
		t.Fatalf("attempt after the fence: want fenced, have %+v", r[0])
	}
	// A follower misses a fence and catches up by snapshot.
	lag := (li + 2) % 3
	c.stop(lag)
	mustPropose(t, c.nodes[li], fence("c"))
	for i := range 40 {
		mustPropose(t, c.nodes[li], put(fmt.Sprintf("p%d", i), fmt.Sprintf("k/p%d", i), "v"))
	}
	n := c.start(lag)
	c.converge(20 * time.Second)
	if n.snapIndex.Load() == 0 {
		t.Fatal("the lagging follower did not restore a snapshot")
	}
	if r := mustPropose(t, n, put("c", "k/c", "v")); r[0].Status != kv.StatusFenced {
		t.Fatalf("late attempt on the restored follower: want fenced, have %+v", r[0])
	}
	c.converge(20 * time.Second)
	for i, node := range c.nodes {
		ctx := context.Background()
		if r, ok := node.Outcome("a"); !ok || r.Status != kv.StatusApplied {
			t.Fatalf("n%d: a: %v %+v", i+1, ok, r)
		}
		for _, id := range []string{"b", "c"} {
			if r, ok := node.Outcome(id); !ok || r.Status != kv.StatusFenced {
				t.Fatalf("n%d: %s: want fenced, have %v %+v", i+1, id, ok, r)
			}
			if _, ok, _ := node.Get(ctx, "k/"+id, false); ok {
				t.Fatalf("n%d: a fenced ID's write applied", i+1)
			}
		}
		if err := node.ReadBarrier(ctx); err != nil {
			t.Fatalf("n%d: read barrier: %v", i+1, err)
		}
	}
}
