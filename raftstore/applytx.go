package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/writ-dev/writ/kv"
)

// One apply transaction: each command of a batch decided (duplicate, fenced,
// vetoed, conflicting or applied) against the state inside the transaction,
// its writes made from an arena, and its outcome recorded.

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
					// A refusal because the state moved since evaluation is a
					// conflict (the proposer decides again), not a decision.
					res.Status = kv.StatusRejected
					if errors.Is(veto, kv.ErrMoved) {
						res.Status = kv.StatusConflict
					}
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
