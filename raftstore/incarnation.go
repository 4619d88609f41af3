package raftstore

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Incarnations. A node's raft ID is derived from its name (RaftID), so a
// member rebuilt under its own name (removed, data directory deleted,
// started again as a joiner and added back) has its predecessor's raft ID.
// What tells the two apart is the incarnation: a random number drawn when
// the data directory's WAL is created and kept in the WAL's metadata. The
// leader names a joiner's incarnation in the conf change that adds it
// (AddLearnerIncarnation; writd's membership layer reads it from the
// node's gossip tags); promotions and removals repeat the incarnation the
// member table holds. A node stops on a removal of its raft ID only when
// that removal names its own incarnation, or none (see removesThisNode):
// the new member catching up from log entries applies its predecessor's
// removal as a change to the configuration that does not concern it, and
// keeps going until the entry that adds it.

// walMetaSep separates the node ID from the incarnation in the WAL
// metadata; a WAL written by an older version holds the node ID alone.
const walMetaSep = "\x00"

// newIncarnation draws a non-zero incarnation.
func newIncarnation() uint64 {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			// crypto/rand does not fail on supported platforms.
			panic(fmt.Sprintf("raftstore: draw incarnation: %v", err))
		}
		if v := binary.BigEndian.Uint64(b[:]); v != 0 {
			return v
		}
	}
}

func encodeWALMetadata(nodeID string, inc uint64) []byte {
	return []byte(nodeID + walMetaSep + fmt.Sprintf("%016x", inc))
}

// decodeWALMetadata returns the node ID and the incarnation (0 for a WAL
// written by an older version) that the WAL's metadata names.
func decodeWALMetadata(meta []byte) (nodeID string, inc uint64, err error) {
	id, hex, ok := strings.Cut(string(meta), walMetaSep)
	if !ok {
		return id, 0, nil
	}
	inc, err = strconv.ParseUint(hex, 16, 64)
	if err != nil || inc == 0 {
		return "", 0, fmt.Errorf("metadata names node %q with a malformed incarnation %q", id, hex)
	}
	return id, inc, nil
}

// Incarnation is the incarnation of this node's data directory: drawn when
// its WAL was created, the same across restarts, and new when the
// directory is deleted and the node starts again. 0 means the WAL was
// written by a version that did not record one. Announce it to whoever
// adds this node (AddLearnerIncarnation).
func (n *Node) Incarnation() uint64 { return n.inc }

// removesThisNode reports whether a removal of this node's raft ID whose
// context names incarnation inc removes this node, rather than an earlier
// incarnation of it. A removal that names no incarnation (written by an
// older version, or of a member whose incarnation was never recorded),
// or a node that has none, is taken as this node's, as before
// incarnations existed.
func (n *Node) removesThisNode(inc uint64) bool {
	return inc == 0 || n.inc == 0 || inc == n.inc
}

// appendIncarnations writes the members' incarnations after the members
// (count, then raft ID and incarnation pairs), where older versions, which
// stop reading after the members, do not look; nothing when none is known.
func appendIncarnations(b []byte, ids []uint64, m map[uint64]memberInfo) []byte {
	var incs []uint64
	for _, id := range ids {
		if inc := m[id].Inc; inc != 0 {
			incs = append(incs, id, inc)
		}
	}
	if len(incs) == 0 {
		return b
	}
	b = binary.AppendUvarint(b, uint64(len(incs)/2))
	for _, v := range incs {
		b = binary.AppendUvarint(b, v)
	}
	return b
}

// decodeIncarnations reads the incarnations that follow the members.
func decodeIncarnations(b []byte, m map[uint64]memberInfo) error {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return errors.New("raftstore: members: bad incarnation count")
	}
	b = b[k:]
	for i := uint64(0); i < n; i++ {
		id, k := binary.Uvarint(b)
		if k <= 0 {
			return errors.New("raftstore: members: bad incarnation id")
		}
		b = b[k:]
		inc, k := binary.Uvarint(b)
		if k <= 0 {
			return errors.New("raftstore: members: bad incarnation")
		}
		b = b[k:]
		if mi, ok := m[id]; ok {
			mi.Inc = inc
			m[id] = mi
		}
	}
	return nil
}
