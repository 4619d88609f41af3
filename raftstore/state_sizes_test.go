package raftstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/writ-dev/writ/kv"
)

// Sizes where the apply arena changes behaviour: empty, its first chunk,
// twice that, the largest request it serves from a chunk, one chunk, and
// the bbolt key limits.
var arenaEdges = func() []int {
	e := []int{0, 1, 7, 8, 9, 1023, 1024, 1025, 2047, 2048, 2049, 2583, 3000, 4095, 4096, 4097,
		arenaChunk/4 - 9, arenaChunk/4 - 8, arenaChunk/4 - 1, arenaChunk / 4, arenaChunk/4 + 1,
		arenaChunk - 1, arenaChunk, arenaChunk + 1, maxIDBytes, maxKeyBytes}
	slices.Sort(e)
	return slices.Compact(e)
}()

// TestApplyOneLargeValue is the regression test for the arena overrun: a
// 3,000-byte value (a job command the schema allows) applied as the first
// command of a transaction panicked with "slice bounds out of range".
func TestApplyOneLargeValue(t *testing.T) {
	s, err := openState(filepath.Join(t.TempDir(), "state.db"), 100)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	val := bytes.Repeat([]byte("x"), 3000)
	var res []kv.Result
	err = s.apply(1, func(a *applyTx) error {
		var err error
		res, err = a.applyCommands(1, []kv.Command{{ID: "big", Effect: kv.Effect{Writes: []kv.Write{{Key: "k", Value: val, Unconditional: true}}}}}, nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Status != kv.StatusApplied {
		t.Fatalf("result %+v", res[0])
	}
	rec, ok, err := s.get("k")
	if err != nil || !ok || !bytes.Equal(rec.Value, val) || rec.Rev != 1 {
		t.Fatalf("get: %v %v rev %d, %d bytes", err, ok, rec.Rev, len(rec.Value))
	}
}

// TestApplyEverySizeAtTheArenaEdges applies, in one transaction each and
// then all in one, a command whose ID, key, value and veto reason take
// every size where the arena switches chunks.
func TestApplyEverySizeAtTheArenaEdges(t *testing.T) {
	s, err := openState(filepath.Join(t.TempDir(), "state.db"), 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	index := uint64(0)
	var all []kv.Command
	for _, n := range arenaEdges {
		id := strings.Repeat("i", min(n, maxIDBytes))
		key := strings.Repeat("k", max(1, min(n, maxKeyBytes)))
		cmds := []kv.Command{
			{ID: id + "p", Effect: kv.Effect{Writes: []kv.Write{{Key: key[1:] + "p", Value: bytes.Repeat([]byte("v"), n), Unconditional: true}}}},
			{ID: id + "v", Type: "veto", Payload: bytes.Repeat([]byte("r"), n)},
		}
		all = append(all, cmds...)
		for _, c := range cmds {
			index++
			err := s.apply(1, func(a *applyTx) error {
				res, err := a.applyCommands(index, []kv.Command{c}, sizedVeto{})
				if err == nil && res[0].Status == kv.StatusDuplicate {
					err = fmt.Errorf("size %d: %+v", n, res[0])
				}
				if err != nil {
					return err
				}
				return a.finish()
			})
			if err != nil {
				t.Fatalf("size %d: %v", n, err)
			}
		}
	}
	// Every command again in one batch: all duplicates or re-vetoed.
	index++
	err = s.apply(1, func(a *applyTx) error {
		_, err := a.applyCommands(index, all, sizedVeto{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// sizedVeto vetoes commands of type "veto" with their payload as reason.
type sizedVeto struct{}

func (sizedVeto) Check(c *kv.Command, _ kv.Reader) error {
	if c.Type == "veto" {
		return errors.New(string(c.Payload))
	}
	return nil
}

// stateModel is what applying commands must leave behind, computed without
// bbolt: keys with their value and revision, and the retained outcomes.
type stateModel struct {
	retention int
	kv        map[string]modelRec
	out       map[string]kv.Result
}

type modelRec struct {
	val []byte
	rev uint64
}

// apply predicts the result of each command at index, in order.
func (m *stateModel) apply(index uint64, cmds []kv.Command) []kv.Status {
	st := make([]kv.Status, len(cmds))
	for i := range cmds {
		c := &cmds[i]
		prev, hasPrev := m.out[c.ID]
		switch {
		case c.ID != "" && hasPrev && prev.Status == kv.StatusApplied:
			st[i] = kv.StatusDuplicate
			continue
		case invalidCommand(c) != "", c.Type == "veto":
			st[i] = kv.StatusRejected
		case !m.preconditionsHold(c.Effect.Writes):
			st[i] = kv.StatusConflict
		default:
			for _, w := range c.Effect.Writes {
				if w.Delete {
					delete(m.kv, w.Key)
				} else {
					m.kv[w.Key] = modelRec{val: w.Value, rev: index}
				}
			}
			st[i] = kv.StatusApplied
		}
		if c.ID != "" && len(c.ID) <= maxIDBytes {
			m.out[c.ID] = kv.Result{Index: index, Status: st[i]}
			m.evict()
		}
	}
	return st
}

func (m *stateModel) preconditionsHold(ws []kv.Write) bool {
	for _, w := range ws {
		if !w.Unconditional && m.kv[w.Key].rev != w.IfRev {
			return false
		}
	}
	return true
}

// evict forgets the oldest outcomes (log index, then ID bytes) beyond the
// retention.
func (m *stateModel) evict() {
	for len(m.out) > m.retention {
		var oldest string
		var oi uint64
		first := true
		for id, r := range m.out {
			if first || r.Index < oi || r.Index == oi && id < oldest {
				oldest, oi, first = id, r.Index, false
			}
		}
		delete(m.out, oldest)
	}
}

// sizeGen draws a size in [0, hi], half the time from the arena edges.
func sizeGen(hi int) *rapid.Generator[int] {
	var edges []int
	for _, e := range arenaEdges {
		if e <= hi {
			edges = append(edges, e)
		}
	}
	edges = append(edges, hi)
	return rapid.OneOf(rapid.SampledFrom(edges), rapid.IntRange(0, hi))
}

// maxApplyBatch is the largest batch the property test applies: the
// default MaxBatchBytes, the most a leader proposes in one entry.
const maxApplyBatch = 1 << 20

// TestApplyPropertyAllSizes applies random batches of puts, deletes,
// conditional writes, vetoes, duplicates and invalid commands whose IDs,
// keys, values and reasons take every size from 0 up to what one entry
// may carry, to a real state database, and checks the results, every read
// and every retained outcome against a model, also after commits and a
// reopen.
func TestApplyPropertyAllSizes(t *testing.T) {
	dir := t.TempDir()
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		path := filepath.Join(dir, fmt.Sprintf("state-%d.db", run))
		const retention = 24
		s, err := openState(path, retention)
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { _ = s.close() }()
		m := &stateModel{retention: retention, kv: map[string]modelRec{}, out: map[string]kv.Result{}}
		// A small pool of keys and IDs of every size, so that writes
		// overlap, IDs repeat and outcomes are evicted.
		keys := rapid.SliceOfNDistinct(rapid.Custom(func(t *rapid.T) string {
			n := sizeGen(maxKeyBytes+1).Draw(t, "keyLen")
			return rapid.StringMatching("[a-c/]").Draw(t, "keyChar") + strings.Repeat("k", max(0, n-1))
		}), 1, 6, rapid.ID).Draw(rt, "keys")
		if rapid.Bool().Draw(rt, "emptyKey") {
			keys = append(keys, "")
		}
		ids := rapid.SliceOfNDistinct(rapid.Custom(func(t *rapid.T) string {
			n := sizeGen(maxIDBytes+1).Draw(t, "idLen")
			return rapid.StringMatching("[a-z]").Draw(t, "idChar") + strings.Repeat("i", max(0, n-1))
		}), 1, 40, rapid.ID).Draw(rt, "ids")
		ids = append(ids, "")
		index := uint64(0)
		batches := rapid.IntRange(1, 12).Draw(rt, "batches")
		for b := range batches {
			budget := maxApplyBatch
			var cmds []kv.Command
			for range rapid.IntRange(1, 8).Draw(rt, "cmds") {
				c := kv.Command{ID: rapid.SampledFrom(ids).Draw(rt, "id")}
				budget -= len(c.ID)
				if rapid.IntRange(0, 5).Draw(rt, "veto") == 0 {
					c.Type = "veto"
					c.Payload = bytes.Repeat([]byte("r"), sizeGen(max(0, budget)).Draw(rt, "reasonLen"))
					budget -= len(c.Payload)
				}
				for range rapid.IntRange(0, 4).Draw(rt, "writes") {
					w := kv.Write{Key: rapid.SampledFrom(keys).Draw(rt, "key")}
					budget -= len(w.Key)
					switch rapid.IntRange(0, 3).Draw(rt, "kind") {
					case 0:
						w.Delete, w.Unconditional = true, true
					case 1:
						// Conditional: right or wrong revision.
						w.IfRev = m.kv[w.Key].rev + uint64(rapid.IntRange(0, 1).Draw(rt, "wrongRev"))
						fallthrough
					default:
						w.Unconditional = w.IfRev == 0 && rapid.Bool().Draw(rt, "uncond")
						n := sizeGen(max(0, budget)).Draw(rt, "valLen")
						w.Value = bytes.Repeat([]byte{byte('A' + b%26)}, n)
						budget -= n
					}
					c.Effect.Writes = append(c.Effect.Writes, w)
				}
				cmds = append(cmds, c)
			}
			index++
			want := m.apply(index, cmds)
			var got []kv.Result
			err := s.apply(1, func(a *applyTx) error {
				var err error
				if got, err = a.applyCommands(index, cmds, sizedVeto{}); err != nil {
					return err
				}
				return a.finish()
			})
			if err != nil {
				rt.Fatalf("batch %d: apply: %v", b, err)
			}
			for i := range want {
				if got[i].Status != want[i] || got[i].Index != index {
					rt.Fatalf("batch %d command %d (id %d bytes): result %v at %d, model says %v", b, i, len(cmds[i].ID), got[i].Status, got[i].Index, want[i])
				}
				if cmds[i].Type == "veto" && want[i] == kv.StatusRejected && invalidCommand(&cmds[i]) == "" && got[i].Reason != string(cmds[i].Payload) {
					rt.Fatalf("batch %d command %d: veto reason of %d bytes came back as %d bytes", b, i, len(cmds[i].Payload), len(got[i].Reason))
				}
				if id := cmds[i].ID; id != "" && len(id) <= maxIDBytes && want[i] != kv.StatusDuplicate {
					r := m.out[id]
					r.Reason, r.FirstIndex = got[i].Reason, got[i].FirstIndex
					m.out[id] = r
				}
			}
			checkModel(rt, fmt.Sprintf("after batch %d", b), s, keys, ids, m)
			if rapid.Bool().Draw(rt, "commit") {
				if err := s.flush(); err != nil {
					rt.Fatal(err)
				}
				checkModel(rt, fmt.Sprintf("after commit %d", b), s, keys, ids, m)
			}
		}
		if err := s.close(); err != nil {
			rt.Fatal(err)
		}
		if s, err = openState(path, retention); err != nil {
			rt.Fatal(err)
		}
		checkModel(rt, "after reopen", s, keys, ids, m)
	})
}

func checkModel(t *rapid.T, when string, s *stateDB, keys, ids []string, m *stateModel) {
	for _, k := range keys {
		rec, ok, err := s.get(k)
		if err != nil {
			t.Fatal(err)
		}
		want, has := m.kv[k]
		if ok != has || !bytes.Equal(rec.Value, want.val) || rec.Rev != want.rev {
			t.Fatalf("%s: get key of %d bytes: present %v rev %d value %d bytes; model: present %v rev %d value %d bytes", when, len(k), ok, rec.Rev, len(rec.Value), has, want.rev, len(want.val))
		}
	}
	got, err := s.list("")
	if err != nil {
		t.Fatal(err)
	}
	var wantKeys []string
	for k := range m.kv {
		wantKeys = append(wantKeys, k)
	}
	sort.Strings(wantKeys)
	gotKeys := make([]string, len(got))
	for i, r := range got {
		gotKeys[i] = r.Key
		if w := m.kv[r.Key]; !bytes.Equal(r.Value, w.val) || r.Rev != w.rev {
			t.Fatalf("%s: list: key of %d bytes at rev %d with %d bytes, model rev %d with %d bytes", when, len(r.Key), r.Rev, len(r.Value), w.rev, len(w.val))
		}
	}
	if !slices.Equal(gotKeys, wantKeys) {
		t.Fatalf("%s: list returned %d keys, model has %d", when, len(gotKeys), len(wantKeys))
	}
	for _, id := range ids {
		if id == "" {
			continue
		}
		r, ok := s.outcome(id)
		w, has := m.out[id]
		if ok != has || ok && (r.Index != w.Index || r.Status != w.Status || r.Reason != w.Reason || r.FirstIndex != w.FirstIndex) {
			t.Fatalf("%s: outcome of ID of %d bytes: %v %v at %d (reason %d bytes); model: %v %v at %d (reason %d bytes)", when, len(id), ok, r.Status, r.Index, len(r.Reason), has, w.Status, w.Index, len(w.Reason))
		}
	}
}

// TestProposeLargeValuesOnARealNode proposes values of every arena edge
// size up to 64 KiB, alone and together in one entry, through a real
// single-node raftstore (WAL, bbolt, transport) and reads them back, also
// after a restart that replays them.
func TestProposeLargeValuesOnARealNode(t *testing.T) {
	c := newCluster(t, 1, nil)
	n := c.nodes[c.leader(10*time.Second)]
	var batch []kv.Command
	for _, size := range arenaEdges {
		val := strings.Repeat("v", size)
		cmd := put(fmt.Sprintf("one-%d", size), fmt.Sprintf("one/%d", size), val)
		if res := mustPropose(t, n, cmd); res[0].Status != kv.StatusApplied {
			t.Fatalf("size %d: %+v", size, res[0])
		}
		batch = append(batch, put(fmt.Sprintf("all-%d", size), fmt.Sprintf("all/%d", size), val))
	}
	for _, r := range mustPropose(t, n, batch...) {
		if r.Status != kv.StatusApplied {
			t.Fatalf("batch: %+v", r)
		}
	}
	check := func(n *Node) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, size := range arenaEdges {
			for _, k := range []string{fmt.Sprintf("one/%d", size), fmt.Sprintf("all/%d", size)} {
				rec, ok, err := n.Get(ctx, k, true)
				if err != nil || !ok || len(rec.Value) != size {
					t.Fatalf("get %s: %v %v %d bytes", k, err, ok, len(rec.Value))
				}
			}
		}
	}
	check(n)
	c.stop(0)
	n = c.start(0)
	c.leader(10 * time.Second)
	check(n)
}
