package raftstore

import (
	"encoding/hex"
	"fmt"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
	"pgregory.net/rapid"

	"github.com/writ-dev/writ/kv"
)

// drawCommandID draws a command ID as the write path records them: a
// time-ordered request ID (internal/reqid's form, from a clock that mostly
// advances and sometimes steps back, as clients' clocks disagree), a
// random one (IDs made before, or by other clients), any bytes of any
// length up to the largest recordable ID, or one used before (a retry).
func drawCommandID(rt *rapid.T, clock *uint64, used []string) string {
	switch rapid.IntRange(0, 9).Draw(rt, "idKind") {
	case 0, 1, 2, 3:
		*clock += uint64(rapid.IntRange(0, 3).Draw(rt, "tick"))
		if rapid.IntRange(0, 19).Draw(rt, "skew") == 0 {
			*clock -= min(*clock, uint64(rapid.IntRange(1, 5000).Draw(rt, "back")))
		}
		return fmt.Sprintf("req:r-%012x%s", *clock, hex.EncodeToString(rapid.SliceOfN(rapid.Byte(), 10, 10).Draw(rt, "rand")))
	case 4, 5:
		return "req:r-" + hex.EncodeToString(rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(rt, "rand"))
	case 6:
		return string(rapid.SliceOfN(rapid.Byte(), 1, maxIDBytes).Draw(rt, "raw"))
	case 7:
		if len(used) > 0 {
			return used[rapid.IntRange(0, len(used)-1).Draw(rt, "again")]
		}
	}
	return "fact:job.state_report:" + rapid.StringMatching(`[a-z0-9-]{1,40}`).Draw(rt, "fact")
}

// TestOutcomeLookupsSurviveRestartAndSnapshot applies batches of commands
// whose IDs mix time-ordered request IDs (which put a commit's new outcome
// records, and the ones retention trims, on the same few pages), random
// ones, arbitrary bytes up to the largest recordable ID and retries, to a
// real state database, committing at random points, with a retention from
// 1 to 300 outcomes. Looking every ID up must give the same answer from
// the live state, after a restart (reopen) and from a fresh database that
// installed the state's snapshot; the table holds the newest outcomes up
// to the retention, and each batch's newest record is always there.
func TestOutcomeLookupsSurviveRestartAndSnapshot(t *testing.T) {
	dir := t.TempDir()
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		path := filepath.Join(dir, fmt.Sprintf("state-%d.db", run))
		retention := rapid.IntRange(1, 300).Draw(rt, "retention")
		s, err := openState(path, retention)
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { _ = s.close() }()
		clock := uint64(1_700_000_000_000)
		var used []string
		index := uint64(0)
		for range rapid.IntRange(1, 40).Draw(rt, "batches") {
			n := rapid.IntRange(1, 40).Draw(rt, "commands")
			cmds := make([]kv.Command, n)
			for i := range cmds {
				id := drawCommandID(rt, &clock, used)
				used = append(used, id)
				cmds[i] = kv.Command{ID: id, Effect: kv.Effect{Writes: []kv.Write{{Key: fmt.Sprintf("k/%d", len(used)), Value: []byte("v"), Unconditional: true}}}}
			}
			index++
			var res []kv.Result
			if err := s.apply(1, func(a *applyTx) error {
				var err error
				if res, err = a.applyCommands(index, cmds, nil); err != nil {
					return err
				}
				if err := a.finish(); err != nil {
					return err
				}
				return putAppliedMeta(a.mb, index)
			}); err != nil {
				rt.Fatal(err)
			}
			// Retention trims in log order, a batch's commands by ID: of
			// the batch's commands applied now (not duplicates of a record
			// retained from before), the greatest ID is the newest record.
			newest := ""
			for i, c := range cmds {
				if res[i].Status == kv.StatusApplied {
					newest = max(newest, c.ID)
				}
			}
			if o, ok := s.outcome(newest); newest != "" && (!ok || o.Index != index) {
				rt.Fatalf("batch %d: its greatest ID %q has outcome %+v %v", index, newest, o, ok)
			}
			if rapid.IntRange(0, 3).Draw(rt, "commit") == 0 {
				if err := s.flush(); err != nil {
					rt.Fatal(err)
				}
			}
		}
		live := lookupAll(s, used)
		if n, want := retained(live), min(retention, len(live)); n != want {
			rt.Fatalf("%d outcomes retained of %d IDs; the retention is %d", n, len(live), retention)
		}
		if err := s.close(); err != nil {
			rt.Fatal(err)
		}
		if s, err = openState(path, retention); err != nil {
			rt.Fatal(err)
		}
		sameOutcomes(rt, "after a restart", live, lookupAll(s, used))
		if n := countOutcomes(rt, s); n != retained(live) {
			rt.Fatalf("after a restart the table holds %d records, lookups found %d", n, retained(live))
		}
		snap, err := s.snapshot()
		if err != nil {
			rt.Fatal(err)
		}
		r, err := openState(path+".restored", retention)
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { _ = r.close() }()
		if _, _, err := r.restore(snap.GetData()); err != nil {
			rt.Fatal(err)
		}
		sameOutcomes(rt, "after installing the snapshot", live, lookupAll(r, used))
	})
}

type lookup struct {
	r  kv.Result
	ok bool
}

func lookupAll(s *stateDB, ids []string) map[string]lookup {
	out := make(map[string]lookup, len(ids))
	for _, id := range ids {
		r, ok := s.outcome(id)
		out[id] = lookup{r, ok}
	}
	return out
}

func retained(m map[string]lookup) int {
	n := 0
	for _, l := range m {
		if l.ok {
			n++
		}
	}
	return n
}

func sameOutcomes(rt *rapid.T, when string, want, got map[string]lookup) {
	for id, w := range want {
		if g := got[id]; g != w {
			rt.Fatalf("%s: outcome of %q is %+v %v, was %+v %v", when, id, g.r, g.ok, w.r, w.ok)
		}
	}
}

func countOutcomes(rt *rapid.T, s *stateDB) int {
	n := 0
	if err := s.view(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketOutcomes).Stats().KeyN
		return nil
	}); err != nil {
		rt.Fatal(err)
	}
	return n
}
