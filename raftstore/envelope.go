package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/writ-dev/writ/kv"
)

// Entry data is an envelope around the kv batch encoding:
//
//	version:u8(=1) origin:uvarint(raft ID) request:uvarint batch(kv codec)
//
// origin and request let the proposing node find its waiter; every other
// node ignores them.
const envelopeVersion = 1

func encodeEnvelope(origin, req uint64, cmds []kv.Command) []byte {
	b := make([]byte, 0, envelopeSizeHint(cmds))
	b = append(b, envelopeVersion)
	b = binary.AppendUvarint(b, origin)
	b = binary.AppendUvarint(b, req)
	return kv.AppendBatch(b, cmds)
}

// envelopeSizeHint bounds the encoded size of an envelope (the kv codec
// writes at most this many varint and flag bytes around the fields), so
// that encoding allocates once.
func envelopeSizeHint(cmds []kv.Command) int {
	n := 1 + 3*binary.MaxVarintLen64
	for i := range cmds {
		c := &cmds[i]
		n += 2 + 7*binary.MaxVarintLen64 + len(c.ID) + len(c.Type) + len(c.Key) + len(c.Guard) + len(c.Payload) + len(c.Origin)
		for j := range c.Effect.Writes {
			w := &c.Effect.Writes[j]
			n += 1 + 3*binary.MaxVarintLen64 + len(w.Key) + len(w.Value)
		}
	}
	return n
}

func decodeEnvelope(data []byte) (origin, req uint64, cmds []kv.Command, err error) {
	if len(data) == 0 || data[0] != envelopeVersion {
		return 0, 0, nil, errors.New("raftstore: entry envelope: unsupported version")
	}
	p := data[1:]
	origin, n := binary.Uvarint(p)
	if n <= 0 {
		return 0, 0, nil, errors.New("raftstore: entry envelope: bad origin")
	}
	p = p[n:]
	req, n = binary.Uvarint(p)
	if n <= 0 {
		return 0, 0, nil, errors.New("raftstore: entry envelope: bad request id")
	}
	cmds, err = kv.DecodeBatch(p[n:])
	if err != nil {
		return 0, 0, nil, fmt.Errorf("raftstore: entry envelope: %w", err)
	}
	return origin, req, cmds, nil
}

// Conf change context: the member's string ID and raft address, then its
// incarnation (a uvarint, omitted when unknown). Older versions read the
// first two and ignore the rest.
func encodeMemberContext(id, addr string) []byte {
	return encodeMemberContextInc(id, addr, 0)
}

// encodeMemberContextInc is encodeMemberContext naming the member's
// incarnation too (0: unknown, not written).
func encodeMemberContextInc(id, addr string, inc uint64) []byte {
	b := appendLP(appendLP(nil, id), addr)
	if inc != 0 {
		b = binary.AppendUvarint(b, inc)
	}
	return b
}

func decodeMemberContext(b []byte) (id, addr string, err error) {
	id, addr, _, err = decodeMemberContextInc(b)
	return id, addr, err
}

// decodeMemberContextInc decodes a member context; inc is 0 when it names
// no incarnation (written by an older version, or for a static peer).
func decodeMemberContextInc(b []byte) (id, addr string, inc uint64, err error) {
	idb, rest, ok := readLP(b)
	if !ok {
		return "", "", 0, errors.New("raftstore: conf change context: bad id")
	}
	ab, rest, ok := readLP(rest)
	if !ok {
		return "", "", 0, errors.New("raftstore: conf change context: bad address")
	}
	if len(rest) > 0 {
		v, k := binary.Uvarint(rest)
		if k <= 0 {
			return "", "", 0, errors.New("raftstore: conf change context: bad incarnation")
		}
		inc = v
	}
	return string(idb), string(ab), inc, nil
}
