package raftstore

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/kv"
)

// TestStateReadsSeeUncommittedApplies applies random batches of puts,
// deletes and retained outcomes to a real state database, committing at
// random points, and checks after every batch that Get, GetMany, List and
// Outcome agree with a plain model of what was applied, whether the
// writes are committed to bbolt or still only in the open transaction. It
// then closes and reopens the database: the reopened state must equal the
// model too.
func TestStateReadsSeeUncommittedApplies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	const retention = 40
	s, err := openState(path, retention)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	model := map[string]string{} // key -> value
	rev := map[string]uint64{}
	var outcomes []string // retained command IDs, oldest first
	keys := []string{"a", "a/1", "a/2", "a/3", "ab", "b", "b/1", "b/2", "c"}
	index := uint64(0)
	for batch := range 300 {
		n := 1 + rng.IntN(4)
		err := s.apply(n, func(a *applyTx) error {
			for range n {
				index++
				var cmd kv.Command
				cmd.ID = fmt.Sprintf("cmd-%d", index)
				for range 1 + rng.IntN(3) {
					k := keys[rng.IntN(len(keys))]
					if rng.IntN(3) == 0 {
						cmd.Effect.Writes = append(cmd.Effect.Writes, kv.Write{Key: k, Delete: true, Unconditional: true})
					} else {
						cmd.Effect.Writes = append(cmd.Effect.Writes, kv.Write{Key: k, Value: []byte(fmt.Sprintf("v%d", index)), Unconditional: true})
					}
				}
				res, err := a.applyCommands(index, []kv.Command{cmd}, nil)
				if err != nil {
					return err
				}
				if res[0].Status != kv.StatusApplied {
					return fmt.Errorf("index %d: %+v", index, res[0])
				}
				for _, w := range cmd.Effect.Writes {
					if w.Delete {
						delete(model, w.Key)
						delete(rev, w.Key)
					} else {
						model[w.Key], rev[w.Key] = string(w.Value), index
					}
				}
				outcomes = append(outcomes, cmd.ID)
				if len(outcomes) > retention {
					outcomes = outcomes[1:]
				}
			}
			return a.finish()
		})
		if err != nil {
			t.Fatal(err)
		}
		if rng.IntN(4) == 0 {
			if err := s.flush(); err != nil {
				t.Fatal(err)
			}
		}
		checkStateAgainstModel(t, fmt.Sprintf("batch %d", batch), s, keys, model, rev, outcomes, index)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	if s, err = openState(path, retention); err != nil {
		t.Fatal(err)
	}
	defer s.close()
	checkStateAgainstModel(t, "after reopen", s, keys, model, rev, outcomes, index)
}

func checkStateAgainstModel(t *testing.T, when string, s *stateDB, keys []string, model map[string]string, rev map[string]uint64, outcomes []string, index uint64) {
	t.Helper()
	recs := make([]kv.Record, len(keys))
	if err := s.getMany(keys, recs); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		rec, ok, err := s.get(k)
		if err != nil {
			t.Fatal(err)
		}
		want, has := model[k]
		if ok != has || string(rec.Value) != want || rec.Rev != rev[k] {
			t.Fatalf("%s: get %q = %+v %v, want %q at %d (present %v)", when, k, rec, ok, want, rev[k], has)
		}
		if recs[i].Key != k || string(recs[i].Value) != want || recs[i].Rev != rev[k] {
			t.Fatalf("%s: getMany[%d] = %+v, want %q at %d", when, i, recs[i], want, rev[k])
		}
	}
	for _, prefix := range []string{"", "a", "a/", "b/", "c", "d"} {
		got, err := s.list(prefix)
		if err != nil {
			t.Fatal(err)
		}
		var gotKeys, wantKeys []string
		for _, r := range got {
			gotKeys = append(gotKeys, fmt.Sprintf("%s=%s@%d", r.Key, r.Value, r.Rev))
		}
		var inPrefix []string
		for k := range model {
			if strings.HasPrefix(k, prefix) {
				inPrefix = append(inPrefix, k)
			}
		}
		slices.Sort(inPrefix) // List returns key order
		for _, k := range inPrefix {
			wantKeys = append(wantKeys, fmt.Sprintf("%s=%s@%d", k, model[k], rev[k]))
		}
		if !slices.Equal(gotKeys, wantKeys) {
			t.Fatalf("%s: list %q = %v, want %v", when, prefix, gotKeys, wantKeys)
		}
	}
	for _, id := range outcomes {
		if r, ok := s.outcome(id); !ok || r.Status != kv.StatusApplied {
			t.Fatalf("%s: outcome %q = %+v %v, want applied", when, id, r, ok)
		}
	}
	if oldest := index - uint64(len(outcomes)); oldest > 0 {
		if r, ok := s.outcome(fmt.Sprintf("cmd-%d", oldest)); ok {
			t.Fatalf("%s: outcome of cmd-%d beyond retention still readable: %+v", when, oldest, r)
		}
	}
}

// TestStateCommitsWhenDue checks the commit policy: an apply leaves the
// transaction open and says how long until it is due; a transaction past
// commitInterval, or holding commitEntries entries, is committed.
func TestStateCommitsWhenDue(t *testing.T) {
	s, err := openState(filepath.Join(t.TempDir(), "state.db"), 10)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	apply := func(entries int) {
		t.Helper()
		if err := s.apply(entries, func(a *applyTx) error {
			_, err := a.applyCommands(1, []kv.Command{put("x", "k", "v")}, nil)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	apply(1)
	wait, err := s.maybeCommit()
	if err != nil || wait <= 0 || wait > commitInterval {
		t.Fatalf("fresh transaction: wait %v, err %v; want a wait in (0, %v]", wait, err, commitInterval)
	}
	if s.wtx == nil {
		t.Fatal("transaction committed before it was due")
	}
	time.Sleep(commitInterval)
	if wait, err := s.maybeCommit(); err != nil || wait != 0 || s.wtx != nil {
		t.Fatalf("after %v: wait %v, err %v, open %v; want committed", commitInterval, wait, err, s.wtx != nil)
	}
	apply(commitEntries)
	if wait, err := s.maybeCommit(); err != nil || wait != 0 || s.wtx != nil {
		t.Fatalf("after %d entries: wait %v, err %v, open %v; want committed", commitEntries, wait, err, s.wtx != nil)
	}
}

// TestRestartRefusesStateBehindItsSnapshot: a local snapshot carries no
// data (the synced state database is its data), so a node whose state.db
// was lost or replaced by an older copy must refuse to start, naming the
// file, instead of running with a hole in its state.
func TestRestartRefusesStateBehindItsSnapshot(t *testing.T) {
	c := newCluster(t, 1, func(_ int, cfg *Config) { cfg.SnapshotCount = 5 })
	n := c.nodes[c.leader(10*time.Second)]
	for i := range 12 {
		mustPropose(t, n, put(fmt.Sprintf("id%d", i), fmt.Sprintf("k%d", i), "v"))
	}
	if n.snapIndex.Load() == 0 {
		t.Fatal("no snapshot taken")
	}
	c.stop(0)
	if err := os.Remove(filepath.Join(c.cfgs[0].DataDir, "state.db")); err != nil {
		t.Fatal(err)
	}
	cfg := c.cfgs[0]
	cfg.Listener = nil
	if n, err := Start(cfg); err == nil {
		n.Stop()
		t.Fatal("started with a state database behind its snapshot")
	} else if !strings.Contains(err.Error(), "state.db") || !strings.Contains(err.Error(), "behind the snapshot") {
		t.Fatalf("error does not name the state database and the fix: %v", err)
	}
}
