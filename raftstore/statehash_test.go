package raftstore

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/writ-dev/writ/kv"
)

// TestStateHashRunningEqualsRecomputed applies random batches to a real
// state database (bbolt) — puts and deletes of keys and values of every
// size, conditional writes that conflict, duplicates, fences, outcomes
// evicted by retention, batches of 1 to 512 commands, several batches in
// one open transaction, failed applies that roll back — and checks after
// each step that the running state hash equals the hash recomputed from
// every record. It also installs the state's snapshot into a fresh
// database, restarts the database, and reopens one whose running sum was
// removed (a state written before it was kept): each has the same hash.
func TestStateHashRunningEqualsRecomputed(t *testing.T) {
	dir := t.TempDir()
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		path := filepath.Join(dir, fmt.Sprintf("state-%d.db", run))
		retention := rapid.IntRange(0, 30).Draw(rt, "retention") // 0: keep every outcome
		s, err := openState(path, retention)
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { _ = s.close() }()
		check := func(when string) [32]byte {
			a1, h1, err := s.hash()
			if err != nil {
				rt.Fatalf("%s: hash: %v", when, err)
			}
			a2, h2, err := s.recomputedHash()
			if err != nil {
				rt.Fatalf("%s: recomputed hash: %v", when, err)
			}
			if a1 != a2 || h1 != h2 {
				rt.Fatalf("%s: running hash %x at %d, recomputed %x at %d", when, h1[:8], a1, h2[:8], a2)
			}
			return h1
		}
		check("empty")
		keys := rapid.SliceOfNDistinct(rapid.Custom(func(t *rapid.T) string {
			n := sizeGen(maxKeyBytes).Draw(t, "keyLen")
			return rapid.StringMatching("[a-d]").Draw(t, "keyChar") + strings.Repeat("k", max(0, n-1))
		}), 1, 8, rapid.ID).Draw(rt, "keys")
		ids := rapid.SliceOfNDistinct(rapid.StringMatching("[a-z]{1,12}"), 1, 60, rapid.ID).Draw(rt, "ids")
		index := uint64(0)
		rev := map[string]uint64{}
		for step := range rapid.IntRange(1, 10).Draw(rt, "steps") {
			entries := rapid.IntRange(1, 3).Draw(rt, "entries")
			fail := rapid.IntRange(0, 7).Draw(rt, "fail") == 0
			staged := map[string]uint64{}
			err := s.apply(entries, func(a *applyTx) error {
				for range entries {
					index++
					var cmds []kv.Command
					budget := maxApplyBatch // the most one entry carries
					for range rapid.OneOf(rapid.SampledFrom([]int{1, 2, 256, 512}), rapid.IntRange(1, 40)).Draw(rt, "cmds") {
						c := kv.Command{ID: rapid.SampledFrom(ids).Draw(rt, "id")}
						if rapid.IntRange(0, 9).Draw(rt, "fence") == 0 {
							c.Type = kv.TypeFence
							cmds = append(cmds, c)
							continue
						}
						for range rapid.IntRange(0, 3).Draw(rt, "writes") {
							w := kv.Write{Key: rapid.SampledFrom(keys).Draw(rt, "key"), Unconditional: true}
							switch rapid.IntRange(0, 3).Draw(rt, "kind") {
							case 0:
								w.Delete = true
							case 1: // conditional, maybe on the wrong revision: a conflict writes nothing
								w.Unconditional = false
								w.IfRev = rev[w.Key] + uint64(rapid.IntRange(0, 1).Draw(rt, "wrongRev"))
								fallthrough
							default:
								n := sizeGen(min(64<<10, budget)).Draw(rt, "valLen")
								budget -= n
								w.Value = bytes.Repeat([]byte{'v'}, n)
							}
							c.Effect.Writes = append(c.Effect.Writes, w)
						}
						cmds = append(cmds, c)
					}
					res, err := a.applyCommands(index, cmds, nil)
					if err != nil {
						return err
					}
					for i, r := range res {
						if r.Status != kv.StatusApplied {
							continue
						}
						for _, w := range cmds[i].Effect.Writes {
							staged[w.Key] = index
							if w.Delete {
								staged[w.Key] = 0
							}
						}
					}
					if err := putAppliedMeta(a.mb, index); err != nil {
						return err
					}
				}
				if fail {
					return errors.New("injected apply failure")
				}
				return a.finish()
			})
			switch {
			case fail && err == nil:
				rt.Fatalf("step %d: the injected failure was not returned", step)
			case fail:
				// rolled back to the last commit: replay would apply it
				// again; here the indexes are simply reused
				a, _, err := s.hash()
				if err != nil {
					rt.Fatal(err)
				}
				index = a
				check(fmt.Sprintf("step %d, after a rolled-back apply", step))
				continue
			case err != nil:
				rt.Fatalf("step %d: apply: %v", step, err)
			}
			for k, r := range staged {
				rev[k] = r
			}
			// compare now (in the open transaction) or after more batches
			if rapid.Bool().Draw(rt, "checkNow") {
				check(fmt.Sprintf("step %d", step))
			}
		}
		want := check("end")

		// Snapshot install: a fresh database restored from the snapshot
		// (there is none of a state that applied nothing).
		if applied, _, _ := s.hash(); applied > 0 {
			checkRestored(rt, s, filepath.Join(dir, fmt.Sprintf("restored-%d.db", run)), retention, want)
		}

		// Restart: the running sum is read back.
		if err := s.close(); err != nil {
			rt.Fatal(err)
		}
		if s, err = openState(path, retention); err != nil {
			rt.Fatal(err)
		}
		if got := check("after restart"); got != want {
			rt.Fatalf("after restart: hash %x, want %x", got[:8], want[:8])
		}

		// A state without the running sum (written before it was kept)
		// gets it computed when it is opened.
		if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Delete(keyStateSum) }); err != nil {
			rt.Fatal(err)
		}
		if err := s.close(); err != nil {
			rt.Fatal(err)
		}
		if s, err = openState(path, retention); err != nil {
			rt.Fatal(err)
		}
		if got := check("reopened without a running sum"); got != want {
			rt.Fatalf("reopened without a running sum: hash %x, want %x", got[:8], want[:8])
		}
	})
}

func checkRestored(rt *rapid.T, s *stateDB, path string, retention int, want [32]byte) {
	snap, err := s.snapshot()
	if err != nil {
		rt.Fatal(err)
	}
	r, err := openState(path, retention)
	if err != nil {
		rt.Fatal(err)
	}
	defer func() { _ = r.close() }()
	if _, _, err := r.restore(snap.GetData()); err != nil {
		rt.Fatal(err)
	}
	if _, got, err := r.hash(); err != nil || got != want {
		rt.Fatalf("restored from the snapshot: hash %x, %v; want %x", got[:8], err, want[:8])
	}
	if _, got, err := r.recomputedHash(); err != nil || got != want {
		rt.Fatalf("restored from the snapshot: recomputed hash %x, %v; want %x", got[:8], err, want[:8])
	}
}

// putAppliedMeta records index as applied, with the term and
// configuration a snapshot needs.
func putAppliedMeta(m *bolt.Bucket, index uint64) error {
	cs, err := proto.Marshal(&raftpb.ConfState{Voters: []uint64{1}})
	if err != nil {
		return err
	}
	for k, v := range map[string][]byte{string(keyApplied): putU64(index), string(keyAppliedTerm): putU64(1), string(keyConfState): cs} {
		if err := m.Put([]byte(k), v); err != nil {
			return err
		}
	}
	return nil
}
