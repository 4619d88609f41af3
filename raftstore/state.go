package raftstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/writ-dev/writ/kv"
)

// Applied state in bbolt. Buckets:
//
//	meta           applied (u64 BE), applied_term (u64 BE), outcomes (u64 BE
//	               count), members (encoded), confstate (raftpb.ConfState)
//	kv             key -> rev (u64 BE) || value
//	outcomes       command ID -> index (u64) || status (u8) || first (u64) || reason
//	outcome_order  index (u64 BE) || command ID -> empty (retention order)
//
// Apply writes into one long-lived bbolt write transaction that also writes
// meta/applied, so a commit always persists exactly the state that the
// applied index describes (W9). It is committed every commitInterval or
// commitEntries entries rather than per apply batch: a bbolt commit costs
// about as much CPU as applying a dozen entries, and the state needs no
// commit to be durable (the WAL is). What the open transaction changed is
// mirrored in an overlay that readers consult first, so a read sees every
// applied entry at once.

var (
	bucketMeta     = []byte("meta")
	bucketKV       = []byte("kv")
	bucketOutcomes = []byte("outcomes")
	bucketOrder    = []byte("outcome_order")
	allBuckets     = [][]byte{bucketMeta, bucketKV, bucketOutcomes, bucketOrder}

	keyApplied     = []byte("applied")
	keyAppliedTerm = []byte("applied_term")
	keyConfState   = []byte("confstate")
	keyOutCount    = []byte("outcomes")
	keyMembers     = []byte("members")
)

type stateDB struct {
	db        *bolt.DB
	retention uint64

	// wmu guards the open write transaction (the applier's, between
	// commits) and the counters that decide when to commit it.
	wmu     sync.Mutex
	wtx     *bolt.Tx
	pending int       // entries applied into wtx
	opened  time.Time // when wtx began
	// onCommit, if set, is told how long each commit took (metrics).
	onCommit func(time.Duration)

	// The overlay: every key and outcome wtx changed, as its encoded bbolt
	// value (nil: deleted). Readers hold ovMu.RLock across the overlay
	// and their bbolt read transaction; the applier takes ovMu.Lock to
	// merge a batch and to clear the overlay after a commit, so a reader
	// sees one applied index across all the keys it reads.
	ovMu  sync.RWMutex
	ovKV  map[string][]byte
	ovOut map[string][]byte
}

// When the open state transaction is committed: after commitInterval, or
// once it holds commitEntries entries, whichever comes first (and before
// every snapshot, hash, restore and close).
const (
	commitInterval = 10 * time.Millisecond
	commitEntries  = 4096
)

func openState(path string, retention int) (*stateDB, error) {
	// Commits do not fsync (NoSync): an applied entry is already durable in
	// the WAL of a quorum, and the state is a deterministic function of the
	// log. The node syncs the state before every snapshot (the point where
	// the WAL stops being the only copy of older entries) and on Stop; after
	// a crash, replay resumes from the applied index that the last durable
	// commit recorded, atomically with its state.
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:         5 * time.Second,
		NoSync:          true,
		NoFreelistSync:  true,
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: 64 << 20,
	})
	if err != nil {
		return nil, fmt.Errorf("raftstore: open state %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		if tx.Bucket(bucketMeta).Get(keyStateSum) == nil {
			return storeFullSum(tx) // new, or written before the sum was kept
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("raftstore: init state %s: %w", path, err)
	}
	return &stateDB{db: db, retention: uint64(retention), ovKV: map[string][]byte{}, ovOut: map[string][]byte{}}, nil
}

func (s *stateDB) close() error {
	if err := s.flush(); err != nil {
		_ = s.db.Close()
		return err
	}
	if err := s.db.Sync(); err != nil {
		_ = s.db.Close()
		return err
	}
	return s.db.Close()
}

// sync commits the open transaction and makes the state durable.
func (s *stateDB) sync() error {
	if err := s.flush(); err != nil {
		return err
	}
	return s.db.Sync()
}

// flush commits the open write transaction, if any.
func (s *stateDB) flush() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.commitLocked()
}

// maybeCommit commits the open transaction if it is due, and otherwise
// returns how long until it is (0: nothing is open).
func (s *stateDB) maybeCommit() (time.Duration, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.wtx == nil {
		return 0, nil
	}
	if age := time.Since(s.opened); age < commitInterval && s.pending < commitEntries {
		return commitInterval - age, nil
	}
	return 0, s.commitLocked()
}

func (s *stateDB) commitLocked() error {
	if s.wtx == nil {
		return nil
	}
	t0 := time.Now()
	err := s.wtx.Commit()
	if s.onCommit != nil {
		s.onCommit(time.Since(t0))
	}
	s.wtx, s.pending = nil, 0
	s.clearOverlay()
	if err != nil {
		return fmt.Errorf("raftstore: commit state: %w", err)
	}
	return nil
}

// rollbackLocked discards the open transaction and its overlay: what it
// held is replayed from the WAL when the node restarts.
func (s *stateDB) rollbackLocked() {
	if s.wtx != nil {
		_ = s.wtx.Rollback()
		s.wtx, s.pending = nil, 0
	}
	s.clearOverlay()
}

func (s *stateDB) clearOverlay() {
	s.ovMu.Lock()
	clear(s.ovKV)
	clear(s.ovOut)
	s.ovMu.Unlock()
}

// writeTxLocked returns the open write transaction, beginning one if none
// is open.
func (s *stateDB) writeTxLocked() (*bolt.Tx, error) {
	if s.wtx != nil {
		return s.wtx, nil
	}
	tx, err := s.db.Begin(true)
	if err != nil {
		return nil, fmt.Errorf("raftstore: begin state transaction: %w", err)
	}
	s.wtx, s.opened = tx, time.Now()
	return tx, nil
}

// apply runs fn, which applies entries entries, in the open write
// transaction and publishes what it changed to readers. If fn fails,
// everything since the last commit is discarded (the node stops, and a
// restart replays it from the WAL).
// A panic in fn is returned as an error, after the same rollback.
func (s *stateDB) apply(entries int, fn func(a *applyTx) error) (err error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	tx, err := s.writeTxLocked()
	if err != nil {
		return err
	}
	defer func() {
		if p := recover(); p != nil {
			s.rollbackLocked()
			err = fmt.Errorf("raftstore: apply panicked: %v", p)
		}
	}()
	a := s.beginApply(tx)
	if err := fn(a); err != nil {
		s.rollbackLocked()
		return err
	}
	if a.sumChanged {
		b := a.sum.bytes()
		if err := a.mb.Put(keyStateSum, append(a.buf(32), b[:]...)); err != nil {
			s.rollbackLocked()
			return fmt.Errorf("raftstore: record state sum: %w", err)
		}
	}
	s.mergeOverlay(a)
	s.pending += entries
	return nil
}

// discard rolls back everything applied since the last commit; the node
// stops, and a restart replays it from the WAL, as after a crash.
func (s *stateDB) discard() {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.rollbackLocked()
}

// view runs fn in a read transaction with the overlay held still.
func (s *stateDB) view(fn func(tx *bolt.Tx) error) error {
	s.ovMu.RLock()
	defer s.ovMu.RUnlock()
	return s.db.View(fn)
}

// mergeOverlay publishes what one apply batch changed.
func (s *stateDB) mergeOverlay(a *applyTx) {
	if len(a.kvChanges) == 0 && len(a.outChanges) == 0 {
		return
	}
	s.ovMu.Lock()
	for _, c := range a.kvChanges {
		s.ovKV[c.key] = c.val
	}
	for _, c := range a.outChanges {
		s.ovOut[c.key] = c.val
	}
	s.ovMu.Unlock()
}

func u64(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

func putU64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// applied returns the persisted applied index and members.
func (s *stateDB) load() (applied uint64, members map[uint64]memberInfo, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		m := tx.Bucket(bucketMeta)
		applied = u64(m.Get(keyApplied))
		var derr error
		members, derr = decodeMembers(m.Get(keyMembers))
		return derr
	})
	if err != nil {
		return 0, nil, fmt.Errorf("raftstore: load state: %w", err)
	}
	return applied, members, nil
}

func (s *stateDB) get(key string) (kv.Record, bool, error) {
	var rec kv.Record
	var ok bool
	err := s.view(func(tx *bolt.Tx) error {
		v, hit := s.ovKV[key]
		if !hit {
			v = tx.Bucket(bucketKV).Get([]byte(key))
		}
		if v != nil {
			rec, ok = decodeRecord(key, v), true
		}
		return nil
	})
	return rec, ok, err
}

// getMany reads several keys in one read transaction; an absent key gets
// kv.Record{Key: keys[i]}.
func (s *stateDB) getMany(keys []string, dst []kv.Record) error {
	return s.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketKV)
		for i, key := range keys {
			v, hit := s.ovKV[key]
			if !hit {
				v = b.Get([]byte(key))
			}
			if v != nil {
				dst[i] = decodeRecord(key, v)
			} else {
				dst[i] = kv.Record{Key: key}
			}
		}
		return nil
	})
}

// list returns the records under prefix in key order: the committed ones
// merged with the overlay's.
func (s *stateDB) list(prefix string) ([]kv.Record, error) {
	var out []kv.Record
	err := s.view(func(tx *bolt.Tx) error {
		var ov []string
		for k := range s.ovKV {
			if strings.HasPrefix(k, prefix) {
				ov = append(ov, k)
			}
		}
		sort.Strings(ov)
		c := tx.Bucket(bucketKV).Cursor()
		p := []byte(prefix)
		k, v := c.Seek(p)
		for {
			committed := k != nil && bytes.HasPrefix(k, p)
			if !committed && len(ov) == 0 {
				return nil
			}
			if len(ov) > 0 && (!committed || ov[0] <= string(k)) {
				if committed && ov[0] == string(k) {
					k, v = c.Next() // the overlay's version replaces it
				}
				if val := s.ovKV[ov[0]]; val != nil {
					out = append(out, decodeRecord(ov[0], val))
				}
				ov = ov[1:]
				continue
			}
			out = append(out, decodeRecord(string(k), v))
			k, v = c.Next()
		}
	})
	return out, err
}

func (s *stateDB) outcome(id string) (kv.Result, bool) {
	var r kv.Result
	var ok bool
	_ = s.view(func(tx *bolt.Tx) error {
		v, hit := s.ovOut[id]
		if !hit {
			v = tx.Bucket(bucketOutcomes).Get([]byte(id))
		}
		r, ok = decodeOutcome(v)
		return nil
	})
	return r, ok
}
