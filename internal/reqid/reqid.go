// Package reqid makes the request IDs the client and the API generate:
// a prefix, then 32 hex digits — a 48-bit Unix millisecond clock followed
// by 80 random bits.
//
// The clock comes first for the applied state's sake. Every replica keeps
// an outcome table, a bbolt B-tree keyed by command ID ("req:" and the
// request ID), and commits it every few milliseconds. With IDs in random
// order each new record, and each old one its retention trims, lands on a
// page of its own, and every commit rewrites one page per write; IDs made
// at about the same time sort next to each other, so a commit's new
// records share a few pages at the table's newest end and its trims a few
// at the oldest (raftstore's BenchmarkApplyCommit). Nothing depends on the
// order for correctness: an ID is an opaque key, and clients may choose
// their own.
//
// Uniqueness rests on the 80 random bits (a collision needs two IDs in
// the same millisecond; about 2^40 of them in one for an even chance).
// The ID reveals when it was made, to the millisecond.
package reqid

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"time"
)

// New returns prefix and a fresh ID of 32 hex digits.
func New(prefix string) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	_, _ = rand.Read(b[6:]) // crypto/rand.Read never fails (Go 1.24+)
	return prefix + hex.EncodeToString(b[:])
}

// Time is the millisecond an ID made by New was made at, and whether id
// (without its prefix) has New's form.
func Time(id string) (time.Time, bool) {
	var b [16]byte
	if len(id) != 32 {
		return time.Time{}, false
	}
	if _, err := hex.Decode(b[:], []byte(id)); err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(int64(binary.BigEndian.Uint64(b[:8]) >> 16)), true
}
