package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Snapshots in chunks. A snapshot message (MsgSnap carrying the whole
// state) larger than one batch is not sent as one frame: its encoding is
// cut into chunk frames of at most MaxBatchBytes each, sent back to back on
// the peer's stream,
//
//	chunk = 0:uvarint total:uvarint offset:uvarint bytes
//
// (a message frame never has a count of 0). The receiver appends the
// chunks in order, offset by offset, and decodes the message when total
// bytes have arrived; it is then checked and stepped like any other. Every
// frame stays under MaxFrameBytes, so a state of any size up to
// MaxSnapshotBytes can be sent. The receiver holds at most MaxSnapshotBytes
// of partly received snapshots at once, over all streams; its buffer grows
// with the bytes that arrive, never from the announced total, and only a
// stream from a member (or, on a joiner, from anyone: it knows no member
// yet) may send chunks.

// errSnapshotBudget: the snapshots being received would hold more than
// MaxSnapshotBytes.
var errSnapshotBudget = errors.New("raftstore: snapshot over MaxSnapshotBytes")

// snapChunk is one decoded chunk frame.
type snapChunk struct {
	total, offset uint64
	data          []byte
}

// isChunkFrame reports whether a frame is a snapshot chunk (count 0).
func isChunkFrame(frame []byte) bool { return len(frame) > 0 && frame[0] == 0 }

func decodeChunk(frame []byte) (snapChunk, error) {
	var c snapChunk
	b := frame[1:]
	total, k := binary.Uvarint(b)
	if k <= 0 {
		return c, errors.New("raftstore: snapshot chunk: bad total")
	}
	b = b[k:]
	off, k := binary.Uvarint(b)
	if k <= 0 {
		return c, errors.New("raftstore: snapshot chunk: bad offset")
	}
	c.total, c.offset, c.data = total, off, b[k:]
	if len(c.data) == 0 || c.offset >= c.total || uint64(len(c.data)) > c.total-c.offset {
		return c, fmt.Errorf("raftstore: snapshot chunk: %d bytes at offset %d do not fit a total of %d", len(c.data), c.offset, c.total)
	}
	return c, nil
}

// appendChunkFrame appends the chunk frame carrying data at offset off of a
// message of total bytes to dst.
func appendChunkFrame(dst []byte, total, off int, data []byte) []byte {
	dst = append(dst, 0)
	dst = binary.AppendUvarint(dst, uint64(total))
	dst = binary.AppendUvarint(dst, uint64(off))
	return append(dst, data...)
}

// chunkFrames cuts the encoding of m into chunk frames of at most chunk
// bytes of payload each.
func chunkFrames(m *raftpb.Message, chunk int) ([][]byte, int, error) {
	enc, err := proto.Marshal(m)
	if err != nil {
		return nil, 0, fmt.Errorf("raftstore: transport: marshal snapshot: %w", err)
	}
	frames := make([][]byte, 0, (len(enc)+chunk-1)/chunk)
	for off := 0; off < len(enc); off += chunk {
		end := min(off+chunk, len(enc))
		// A fresh buffer per frame: gRPC may still be writing one after
		// SendMsg returns.
		f := appendChunkFrame(make([]byte, 0, end-off+1+2*binary.MaxVarintLen64), len(enc), off, enc[off:end])
		frames = append(frames, f)
	}
	return frames, len(enc), nil
}

// snapAssembly is one stream's snapshot being received. Its bytes are
// accounted in the transport's budget (held) until done or released.
type snapAssembly struct {
	held   *atomic.Int64 // the transport's bytes in all assemblies
	limit  int64
	total  uint64
	buf    []byte
	active bool
}

// add appends a chunk. It returns the reassembled message when the chunk
// completes it, nil while more are due, and an error for a chunk out of
// order, one that changes the total, or one past the budget.
func (a *snapAssembly) add(c snapChunk) (*raftpb.Message, error) {
	if !a.active {
		if c.offset != 0 {
			return nil, fmt.Errorf("raftstore: snapshot chunk at offset %d starts no snapshot", c.offset)
		}
		if c.total > uint64(a.limit) {
			return nil, fmt.Errorf("%w: a snapshot of %d bytes, the limit is %d: raise it on every node", errSnapshotBudget, c.total, a.limit)
		}
		a.active, a.total = true, c.total
	}
	if c.total != a.total || c.offset != uint64(len(a.buf)) {
		return nil, fmt.Errorf("raftstore: snapshot chunk out of order: offset %d of %d, expected offset %d of %d", c.offset, c.total, len(a.buf), a.total)
	}
	if h := a.held.Add(int64(len(c.data))); h > a.limit {
		a.held.Add(-int64(len(c.data)))
		return nil, fmt.Errorf("%w: snapshots being received already hold %d bytes, the limit is %d", errSnapshotBudget, h-int64(len(c.data)), a.limit)
	}
	a.buf = append(a.buf, c.data...)
	if uint64(len(a.buf)) < a.total {
		return nil, nil
	}
	buf := a.buf
	a.release()
	m := &raftpb.Message{}
	if err := proto.Unmarshal(buf, m); err != nil {
		return nil, fmt.Errorf("raftstore: reassembled snapshot does not decode: %w", err)
	}
	if m.GetType() != raftpb.MsgSnap {
		return nil, fmt.Errorf("raftstore: chunked message is %s, only snapshots are sent in chunks", m.GetType())
	}
	return m, nil
}

// release gives the partly received bytes back to the budget.
func (a *snapAssembly) release() {
	a.held.Add(-int64(len(a.buf)))
	a.buf, a.total, a.active = nil, 0, false
}
