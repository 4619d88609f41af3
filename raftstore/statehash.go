package raftstore

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/bits"

	bolt "go.etcd.io/bbolt"
)

// The state hash is kept running, so that reporting it costs O(1) instead
// of a pass over every key: the digest of a set of records is the sum,
// modulo 2^256, of one SHA-256 per record (bucket tag, key and value, each
// length-prefixed). The sum does not depend on the order the records were
// written in, a put adds its record's term and subtracts the one it
// replaced, and a delete subtracts. Apply keeps it in meta/state_sum inside
// the same transaction as meta/applied, so the two always describe the same
// state; opening a state written without it, and installing a snapshot,
// compute it once from every record. It detects replicas that diverge (by
// accident, not by a crafted state: a sum of hashes is weaker than one hash
// over the whole state against an adversary, who cannot write the state
// anyway).
type stateSum [4]uint64

var keyStateSum = []byte("state_sum")

// Bucket tags in record digests.
const (
	tagKV      = 1
	tagOutcome = 2
)

func recordDigest(tag byte, k, v []byte) stateSum {
	h := sha256.New()
	var l [8]byte
	h.Write([]byte{tag})
	binary.BigEndian.PutUint64(l[:], uint64(len(k)))
	h.Write(l[:])
	h.Write(k)
	binary.BigEndian.PutUint64(l[:], uint64(len(v)))
	h.Write(l[:])
	h.Write(v)
	var d [32]byte
	h.Sum(d[:0])
	return decodeSum(d[:])
}

func (s *stateSum) add(d stateSum) {
	var c uint64
	for i := 3; i >= 0; i-- {
		s[i], c = bits.Add64(s[i], d[i], c)
	}
}

func (s *stateSum) sub(d stateSum) {
	var b uint64
	for i := 3; i >= 0; i-- {
		s[i], b = bits.Sub64(s[i], d[i], b)
	}
}

func (s stateSum) bytes() [32]byte {
	var out [32]byte
	for i, w := range s {
		binary.BigEndian.PutUint64(out[8*i:], w)
	}
	return out
}

// decodeSum reads 32 big-endian bytes; anything else is the zero sum.
func decodeSum(b []byte) stateSum {
	var s stateSum
	if len(b) != 32 {
		return s
	}
	for i := range s {
		s[i] = binary.BigEndian.Uint64(b[8*i:])
	}
	return s
}

// fullSum recomputes the state sum from every record in tx.
func fullSum(tx *bolt.Tx) (stateSum, error) {
	var s stateSum
	for _, b := range []struct {
		tag  byte
		name []byte
	}{{tagKV, bucketKV}, {tagOutcome, bucketOutcomes}} {
		err := tx.Bucket(b.name).ForEach(func(k, v []byte) error {
			s.add(recordDigest(b.tag, k, v))
			return nil
		})
		if err != nil {
			return s, fmt.Errorf("raftstore: state sum: %w", err)
		}
	}
	return s, nil
}

// storeFullSum recomputes the sum in a write transaction and records it.
func storeFullSum(tx *bolt.Tx) error {
	s, err := fullSum(tx)
	if err != nil {
		return err
	}
	b := s.bytes()
	return tx.Bucket(bucketMeta).Put(keyStateSum, b[:])
}

// sumPut accounts for writing v at k in a bucket whose current value is
// old (nil: absent).
func (a *applyTx) sumPut(tag byte, k, old, v []byte) {
	if old != nil {
		a.sum.sub(recordDigest(tag, k, old))
	}
	if v != nil {
		a.sum.add(recordDigest(tag, k, v))
	}
	a.sumChanged = true
}

// hash is the applied index and the digest of the replicated state (keys,
// values, revisions and retained outcomes), equal on replicas that applied
// the same log prefix. It reads two meta keys: no pass over the state and
// no commit.
func (s *stateDB) hash() (applied uint64, sum [32]byte, err error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	read := func(m *bolt.Bucket) {
		applied = u64(m.Get(keyApplied))
		sum = decodeSum(m.Get(keyStateSum)).bytes()
	}
	if s.wtx != nil {
		read(s.wtx.Bucket(bucketMeta)) // the applier uses wtx only under wmu
		return applied, sum, nil
	}
	err = s.db.View(func(tx *bolt.Tx) error { read(tx.Bucket(bucketMeta)); return nil })
	return applied, sum, err
}

// recomputedHash is hash computed from every record: what the running sum
// must equal.
func (s *stateDB) recomputedHash() (applied uint64, sum [32]byte, err error) {
	if err := s.flush(); err != nil {
		return 0, sum, err
	}
	err = s.db.View(func(tx *bolt.Tx) error {
		applied = u64(tx.Bucket(bucketMeta).Get(keyApplied))
		fs, err := fullSum(tx)
		sum = fs.bytes()
		return err
	})
	return applied, sum, err
}
