package raftstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

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

// txReader lets a kv.Checker read state inside the apply transaction, so it
// sees the writes of earlier commands of the same batch.
type txReader struct{ b *bolt.Bucket }

func (r txReader) Get(key string) (kv.Record, bool) {
	v := r.b.Get([]byte(key))
	if v == nil {
		return kv.Record{}, false
	}
	return decodeRecord(key, v), true
}

func decodeRecord(key string, v []byte) kv.Record {
	rec := kv.Record{Key: key, Rev: binary.BigEndian.Uint64(v[:8])}
	if len(v) > 8 {
		rec.Value = append([]byte(nil), v[8:]...)
	}
	return rec
}

// An outcome record is index:u64 status:u8 first:u64 [digest:u64
// verdict:u8] reason. Records written before digests existed have no
// digest and verdict; the written ones mark them with outcomeV2 in the
// status byte.
const (
	outcomeV2      = 0x80
	outcomeV1Bytes = 17
	outcomeV2Bytes = 26
)

func appendOutcome(b []byte, r kv.Result) []byte {
	b = binary.BigEndian.AppendUint64(b, r.Index)
	b = append(b, byte(r.Status)|outcomeV2)
	b = binary.BigEndian.AppendUint64(b, r.FirstIndex)
	b = binary.BigEndian.AppendUint64(b, r.Digest)
	b = append(b, r.Verdict)
	return append(b, r.Reason...)
}

func decodeOutcome(v []byte) (kv.Result, bool) {
	if len(v) < outcomeV1Bytes {
		return kv.Result{}, false
	}
	r := kv.Result{
		Index:      binary.BigEndian.Uint64(v[:8]),
		Status:     kv.Status(v[8] &^ outcomeV2),
		FirstIndex: binary.BigEndian.Uint64(v[9:17]),
	}
	if v[8]&outcomeV2 == 0 {
		r.Reason = string(v[outcomeV1Bytes:])
		return r, true
	}
	if len(v) < outcomeV2Bytes {
		return kv.Result{}, false
	}
	r.Digest = binary.BigEndian.Uint64(v[17:25])
	r.Verdict = v[25]
	r.Reason = string(v[outcomeV2Bytes:])
	return r, true
}

// applyTx is one apply transaction: its buckets, the outcome count (read
// once, written once at the end) and an arena for the keys and values
// handed to bbolt, which must stay valid until the transaction ends.
type applyTx struct {
	s                  *stateDB
	kvb, outb, ord, mb *bolt.Bucket
	count              uint64
	countChanged       bool
	// sum is the running state sum (statehash.go) as of this batch.
	sum        stateSum
	sumChanged bool
	arena      []byte
	// What this batch changed, for the overlay (val nil: deleted).
	kvChanges, outChanges []change
	// before holds the records checkPreconditions read for the command
	// being applied (readBefore).
	before []readRec
	// The commands being applied and which one, for a fatal apply error.
	cmds []kv.Command
	cur  int
}

// current names the command being applied: its ID and how many commands
// its entry carries.
func (a *applyTx) current() (string, int) {
	if a.cur < 0 || a.cur >= len(a.cmds) {
		return "", len(a.cmds)
	}
	return a.cmds[a.cur].ID, len(a.cmds)
}

type change struct {
	key string
	val []byte
}

const arenaChunk = 32 << 10

func (s *stateDB) beginApply(tx *bolt.Tx) *applyTx {
	a := &applyTx{
		s:    s,
		kvb:  tx.Bucket(bucketKV),
		outb: tx.Bucket(bucketOutcomes),
		ord:  tx.Bucket(bucketOrder),
		mb:   tx.Bucket(bucketMeta),
	}
	// Retention order keys only grow (log index first): fill pages fully
	// instead of splitting them in half.
	a.ord.FillPercent = 1.0
	a.count = u64(a.mb.Get(keyOutCount))
	a.sum = decodeSum(a.mb.Get(keyStateSum))
	return a
}

// buf returns an empty slice with capacity n that lives as long as the
// transaction; the caller appends at most n bytes to it.
func (a *applyTx) buf(n int) []byte {
	if n > arenaChunk/4 {
		return make([]byte, 0, n)
	}
	if cap(a.arena)-len(a.arena) < n {
		// Chunks grow with the transaction: one entry's transaction stays
		// small, a large batch's takes few allocations.
		size := min(max(2*cap(a.arena), 1024), arenaChunk)
		if !canaryApplyOverrun {
			// A fresh chunk must hold n (n <= arenaChunk/4 here).
			size = max(size, n)
		}
		a.arena = make([]byte, 0, size)
	}
	l := len(a.arena)
	a.arena = a.arena[:l+n]
	return a.arena[l : l : l+n]
}

// finish writes what the transaction kept in memory.
func (a *applyTx) finish() error {
	if !a.countChanged {
		return nil
	}
	return a.mb.Put(keyOutCount, binary.BigEndian.AppendUint64(a.buf(8), a.count))
}

// applyCommands applies one batch of commands at index. The decision for
// each command depends only on the state in the transaction, so every
// replica decides the same: duplicate (ID already applied) → checker veto →
// revision preconditions → writes.
func (a *applyTx) applyCommands(index uint64, cmds []kv.Command, checker kv.Checker) ([]kv.Result, error) {
	results := make([]kv.Result, len(cmds))
	a.cmds = cmds
	for i := range cmds {
		a.cur = i
		c := &cmds[i]
		res := kv.Result{Index: index}
		var prev kv.Result
		var hasPrev bool
		var idKey, prevRec []byte
		// An ID beyond maxIDBytes cannot be a bbolt key with its retention
		// prefix: the command is rejected and its outcome not recorded.
		recordable := c.ID != "" && len(c.ID) <= maxIDBytes
		if recordable {
			idKey = append(a.buf(len(c.ID)), c.ID...)
			prevRec = a.outb.Get(idKey)
			prev, hasPrev = decodeOutcome(prevRec)
		}
		// keep: the recorded outcome stands (a duplicate, or a command
		// refused because its ID is fenced).
		keep := false
		switch {
		case hasPrev && (prev.Status == kv.StatusApplied):
			res.Status = kv.StatusDuplicate
			res.FirstIndex = prev.Index
			res.Digest, res.Verdict = prev.Digest, prev.Verdict
			res.Reason = fmt.Sprintf("duplicate: command ID %q was first applied at index %d", c.ID, prev.Index)
			keep = true
		case hasPrev && prev.Status == kv.StatusFenced:
			res.Status = kv.StatusFenced
			res.FirstIndex = prev.Index
			res.Reason = fmt.Sprintf("not committed: command ID %q was fenced at index %d", c.ID, prev.Index)
			keep = true
		case c.Type == kv.TypeFence:
			if reason := invalidFence(c, recordable); reason != "" {
				res.Status = kv.StatusRejected
				res.Reason = reason
				break
			}
			res.Status = kv.StatusFenced
			res.FirstIndex = index
			res.Reason = fmt.Sprintf("not committed: command ID %q was fenced at index %d", c.ID, index)
		default:
			res.Digest, res.Verdict = kv.PayloadDigest(c.Payload), c.Verdict
			if reason := invalidCommand(c); reason != "" {
				res.Status = kv.StatusRejected
				res.Reason = reason
				break
			}
			if checker != nil {
				veto, err := runChecker(checker, c, txReader{a.kvb})
				if err != nil {
					return nil, fmt.Errorf("raftstore: apply index %d command %q: %w", index, c.ID, err)
				}
				if veto != nil {
					res.Status = kv.StatusRejected
					res.Reason = veto.Error()
					break
				}
			}
			if reason := a.checkPreconditions(c.Effect.Writes); reason != "" {
				res.Status = kv.StatusConflict
				res.Reason = reason
				break
			}
			for j, w := range c.Effect.Writes {
				key := append(a.buf(len(w.Key)), w.Key...)
				var err error
				var v []byte
				if !w.Delete {
					v = binary.BigEndian.AppendUint64(a.buf(8+len(w.Value)), index)
					v = append(v, w.Value...)
				}
				// the value replaced is hashed before Put or Delete reuses its memory
				old, ok := a.readBefore(c.Effect.Writes, j)
				if !ok {
					old = a.kvb.Get(key)
				}
				if old != nil || v != nil {
					a.sumPut(tagKV, key, old, v)
				}
				if w.Delete {
					err = a.kvb.Delete(key)
				} else {
					err = a.kvb.Put(key, v)
				}
				a.kvChanges = append(a.kvChanges, change{w.Key, v})
				if err != nil {
					return nil, fmt.Errorf("raftstore: apply index %d key %q: %w", index, w.Key, err)
				}
			}
			res.Status = kv.StatusApplied
		}
		results[i] = res
		// Record the outcome. A duplicate never overwrites the first
		// application; a non-applied outcome is replaced by a later attempt
		// with the same ID (it changed nothing, so a retry is safe).
		if recordable && !keep {
			if err := a.recordOutcome(c.ID, idKey, prevRec, res, prev, hasPrev); err != nil {
				return nil, err
			}
		}
	}
	return results, nil
}

// Limits that bbolt imposes on keys; a command beyond them is rejected
// (deterministically, on every replica) instead of failing the apply.
const (
	maxKeyBytes = bolt.MaxKeySize
	maxIDBytes  = bolt.MaxKeySize - 8 // the retention index prefixes 8 bytes
)

// invalidCommand explains why a command cannot be applied as written, or
// returns "".
func invalidCommand(c *kv.Command) string {
	if len(c.ID) > maxIDBytes {
		return fmt.Sprintf("invalid command: id is %d bytes, the limit is %d", len(c.ID), maxIDBytes)
	}
	for j, w := range c.Effect.Writes {
		switch {
		case w.Key == "":
			return fmt.Sprintf("invalid command: writes[%d].key is empty; every write needs a key", j)
		case len(w.Key) > maxKeyBytes:
			return fmt.Sprintf("invalid command: writes[%d].key is %d bytes, the limit is %d", j, len(w.Key), maxKeyBytes)
		}
	}
	return ""
}

// invalidFence explains why a fence cannot be applied, or returns "".
func invalidFence(c *kv.Command, recordable bool) string {
	switch {
	case !recordable:
		return fmt.Sprintf("invalid fence: id must be 1 to %d bytes", maxIDBytes)
	case len(c.Effect.Writes) > 0:
		return "invalid fence: a fence carries no writes"
	}
	return ""
}

// runChecker calls the checker; a panic is a fatal apply error (the node
// stops) rather than a verdict, because it may not be deterministic.
func runChecker(ch kv.Checker, c *kv.Command, r kv.Reader) (veto, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("checker panicked: %v", p)
		}
	}()
	return ch.Check(c, r), nil
}

// checkPreconditions checks the writes' revision preconditions against
// the state before the command, keeping each conditional write's current
// record for readBefore.
func (a *applyTx) checkPreconditions(writes []kv.Write) string {
	a.before = a.before[:0]
	keep := len(writes) <= maxReadBefore
	for _, w := range writes {
		if w.Unconditional {
			if keep {
				a.before = append(a.before, readRec{})
			}
			continue
		}
		v := a.kvb.Get([]byte(w.Key))
		if keep {
			a.before = append(a.before, readRec{v: v, ok: true})
		}
		var cur uint64
		if v != nil {
			cur = binary.BigEndian.Uint64(v[:8])
		}
		if cur != w.IfRev {
			return fmt.Sprintf("conflict: key %q is at revision %d, precondition expected revision %d", w.Key, cur, w.IfRev)
		}
	}
	return ""
}

// maxReadBefore bounds the writes per command whose records
// checkPreconditions keeps (readBefore compares each with the ones before
// it).
const maxReadBefore = 16

// readRec is a key's record as checkPreconditions read it (v nil: absent);
// ok is false when it was not read.
type readRec struct {
	v  []byte
	ok bool
}

// readBefore returns write j's key's current record when
// checkPreconditions read it and no earlier write of the same command
// changed that key since; ok is false when the caller must read it. The
// record is still valid: bbolt keeps the bytes a Get returned (a mapped
// page, or a value put earlier in the transaction) until the transaction
// ends, and only writes to the same key change what it holds.
func (a *applyTx) readBefore(writes []kv.Write, j int) (v []byte, ok bool) {
	if j >= len(a.before) || !a.before[j].ok {
		return nil, false
	}
	for i := range j {
		if writes[i].Key == writes[j].Key {
			return nil, false
		}
	}
	return a.before[j].v, true
}

func (a *applyTx) orderKey(index uint64, id []byte) []byte {
	return append(binary.BigEndian.AppendUint64(a.buf(8+len(id)), index), id...)
}

// recordOutcome records res for the command ID (id is the same ID as the
// bbolt key, idStr as the overlay's).
func (a *applyTx) recordOutcome(idStr string, id, prevRec []byte, res kv.Result, prev kv.Result, hasPrev bool) error {
	if hasPrev {
		if err := a.ord.Delete(a.orderKey(prev.Index, id)); err != nil {
			return err
		}
		a.count--
	}
	enc := appendOutcome(a.buf(outcomeV2Bytes+len(res.Reason)), res)
	a.sumPut(tagOutcome, id, prevRec, enc) // prevRec: the record applyCommands read, unchanged since
	if err := a.outb.Put(id, enc); err != nil {
		return err
	}
	a.outChanges = append(a.outChanges, change{idStr, enc})
	if err := a.ord.Put(a.orderKey(res.Index, id), nil); err != nil {
		return err
	}
	a.count++
	a.countChanged = true
	// Bounded retention: forget the oldest outcomes beyond the limit. The
	// order is the log order, so every replica forgets the same ones.
	if a.s.retention > 0 && a.count > a.s.retention {
		cur := a.ord.Cursor()
		for a.count > a.s.retention {
			k, _ := cur.First()
			if k == nil {
				break
			}
			a.sumPut(tagOutcome, k[8:], a.outb.Get(k[8:]), nil)
			if err := a.outb.Delete(k[8:]); err != nil {
				return err
			}
			a.outChanges = append(a.outChanges, change{string(k[8:]), nil})
			if err := cur.Delete(); err != nil {
				return err
			}
			a.count--
		}
	}
	return nil
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

// Snapshot data: "WRITSNAP" version(1) then records
// bucket(u8, 1-based index into allBuckets) klen:uvarint k vlen:uvarint v,
// terminated by a zero byte.
var snapMagic = []byte("WRITSNAP\x01")

// snapshot serializes the committed state (after committing the open
// transaction) into a raft snapshot named by the state's own applied
// index, term and configuration.
func (s *stateDB) snapshot() (*raftpb.Snapshot, error) {
	if err := s.flush(); err != nil {
		return nil, err
	}
	var snap *raftpb.Snapshot
	err := s.db.View(func(tx *bolt.Tx) error {
		m := tx.Bucket(bucketMeta)
		cs := &raftpb.ConfState{}
		if err := proto.Unmarshal(m.Get(keyConfState), cs); err != nil {
			return fmt.Errorf("decode configuration: %w", err)
		}
		applied, term := u64(m.Get(keyApplied)), u64(m.Get(keyAppliedTerm))
		if applied == 0 || term == 0 || len(cs.GetVoters()) == 0 {
			return errors.New("no applied state with its term and configuration recorded yet")
		}
		data, err := snapshotData(tx)
		if err != nil {
			return err
		}
		snap = &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{Index: &applied, Term: &term, ConfState: cs}}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("raftstore: snapshot of the state: %w", err)
	}
	return snap, nil
}

func snapshotData(tx *bolt.Tx) ([]byte, error) {
	// The database size bounds the records' size: one allocation.
	data := append(make([]byte, 0, tx.Size()+int64(len(snapMagic))+1), snapMagic...)
	for i, name := range allBuckets {
		err := tx.Bucket(name).ForEach(func(k, v []byte) error {
			data = append(data, byte(i+1))
			data = binary.AppendUvarint(data, uint64(len(k)))
			data = append(data, k...)
			data = binary.AppendUvarint(data, uint64(len(v)))
			data = append(data, v...)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return append(data, 0), nil
}

// restore replaces the whole state with snapshot data in one transaction.
func (s *stateDB) restore(data []byte) (applied uint64, members map[uint64]memberInfo, err error) {
	if !bytes.HasPrefix(data, snapMagic) {
		return 0, nil, errors.New("raftstore: snapshot data: bad magic or version")
	}
	p := data[len(snapMagic):]
	if err := s.flush(); err != nil {
		return 0, nil, err
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		bs := make([]*bolt.Bucket, len(allBuckets))
		for i, name := range allBuckets {
			if err := tx.DeleteBucket(name); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
				return err
			}
			b, err := tx.CreateBucket(name)
			if err != nil {
				return err
			}
			bs[i] = b
		}
		for {
			if len(p) == 0 {
				return errors.New("raftstore: snapshot data: truncated")
			}
			bi := int(p[0])
			p = p[1:]
			if bi == 0 {
				break
			}
			if bi > len(bs) {
				return fmt.Errorf("raftstore: snapshot data: unknown bucket %d", bi)
			}
			var k, v []byte
			var ok bool
			if k, p, ok = readLP(p); !ok {
				return errors.New("raftstore: snapshot data: bad key")
			}
			if v, p, ok = readLP(p); !ok {
				return errors.New("raftstore: snapshot data: bad value")
			}
			if err := bs[bi-1].Put(k, v); err != nil {
				return err
			}
		}
		// The sender's sum came with its meta bucket; recompute it from
		// the records rather than trust it (or miss it, from an older node).
		if err := storeFullSum(tx); err != nil {
			return err
		}
		m := bs[0]
		applied = u64(m.Get(keyApplied))
		var derr error
		members, derr = decodeMembers(m.Get(keyMembers))
		return derr
	})
	return applied, members, err
}

func readLP(p []byte) (val, rest []byte, ok bool) {
	l, n := binary.Uvarint(p)
	if n <= 0 || l > uint64(len(p)-n) {
		return nil, nil, false
	}
	return p[n : n+int(l)], p[n+int(l):], true
}

// memberInfo is what the state knows about one consensus member.
type memberInfo struct {
	ID      string
	Addr    string
	Learner bool
	// Inc is the incarnation of the member's data directory (0: unknown).
	Inc uint64
}

func encodeMembers(m map[uint64]memberInfo) []byte {
	ids := make([]uint64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	b := binary.AppendUvarint(nil, uint64(len(ids)))
	for _, id := range ids {
		mi := m[id]
		b = binary.AppendUvarint(b, id)
		b = appendLP(b, mi.ID)
		b = appendLP(b, mi.Addr)
		if mi.Learner {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	return appendIncarnations(b, ids, m)
}

func appendLP(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func decodeMembers(b []byte) (map[uint64]memberInfo, error) {
	m := map[uint64]memberInfo{}
	if len(b) == 0 {
		return m, nil
	}
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, errors.New("raftstore: members: bad count")
	}
	b = b[k:]
	for i := uint64(0); i < n; i++ {
		id, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, errors.New("raftstore: members: bad id")
		}
		b = b[k:]
		var sid, addr []byte
		var ok bool
		if sid, b, ok = readLP(b); !ok {
			return nil, errors.New("raftstore: members: bad name")
		}
		if addr, b, ok = readLP(b); !ok {
			return nil, errors.New("raftstore: members: bad address")
		}
		if len(b) < 1 {
			return nil, errors.New("raftstore: members: truncated")
		}
		m[id] = memberInfo{ID: string(sid), Addr: string(addr), Learner: b[0] == 1}
		b = b[1:]
	}
	if len(b) > 0 {
		if err := decodeIncarnations(b, m); err != nil {
			return nil, err
		}
	}
	return m, nil
}
