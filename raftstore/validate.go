package raftstore

import (
	"errors"
	"fmt"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/writ-dev/writ/kv"
)

// Defence of the raft port, independent of who may connect to it: a
// message that would make raft panic, or make the leader append an entry
// that no replica can apply, is refused before it reaches raft.

// errMalformed marks a message refused by checkIncoming; the transport
// drops the stream it came on and logs the source address.
var errMalformed = errors.New("raftstore: malformed raft message")

// ErrEntryTooLarge: a proposal encodes to more than MaxEntryBytes. It
// wraps kv.ErrDropped: the batch was definitely not appended.
var ErrEntryTooLarge = fmt.Errorf("raftstore: entry too large (%w)", kv.ErrDropped)

// checkIncoming validates a message received from the network. lastIndex
// is this node's last durable log index.
func (n *Node) checkIncoming(m *raftpb.Message, lastIndex uint64) error {
	if m.GetTo() != n.id {
		return fmt.Errorf("%w: %s addressed to %x, this node is %x", errMalformed, m.GetType(), m.GetTo(), n.id)
	}
	if m.GetFrom() == 0 || m.GetFrom() == n.id {
		return fmt.Errorf("%w: %s from %x", errMalformed, m.GetType(), m.GetFrom())
	}
	switch m.GetType() {
	case raftpb.MsgProp:
		if len(m.GetEntries()) == 0 {
			return fmt.Errorf("%w: MsgProp without entries", errMalformed)
		}
		for i, e := range m.GetEntries() {
			if err := n.checkProposedEntry(e); err != nil {
				return fmt.Errorf("%w: MsgProp entry %d: %w", errMalformed, i, err)
			}
		}
	case raftpb.MsgApp:
		// What a leader sends was checked when it was proposed; decoding
		// it again here keeps an entry no replica can apply out of this
		// node's log whoever sent it.
		for i, e := range m.GetEntries() {
			if err := n.checkProposedEntry(e); err != nil {
				return fmt.Errorf("%w: MsgApp entry %d (index %d): %w", errMalformed, i, e.GetIndex(), err)
			}
		}
	case raftpb.MsgHeartbeat:
		// A leader never sends a commit index beyond what this node
		// acknowledged as durable; raft panics on one.
		if m.GetCommit() > lastIndex {
			return fmt.Errorf("%w: MsgHeartbeat commits index %d, beyond this node's last index %d", errMalformed, m.GetCommit(), lastIndex)
		}
	case raftpb.MsgSnap:
		s := m.GetSnapshot()
		if s == nil || s.GetMetadata() == nil || s.GetMetadata().GetIndex() == 0 {
			return fmt.Errorf("%w: MsgSnap without a snapshot index", errMalformed)
		}
		if len(s.GetMetadata().GetConfState().GetVoters()) == 0 {
			return fmt.Errorf("%w: MsgSnap at %d names no voters", errMalformed, s.GetMetadata().GetIndex())
		}
		if err := checkSnapshotData(s.GetData()); err != nil {
			return fmt.Errorf("%w: MsgSnap at %d: %w", errMalformed, s.GetMetadata().GetIndex(), err)
		}
	}
	return nil
}

// checkEntryShape checks what every replica needs of a log entry: it fits
// MaxEntryBytes, and a configuration change decodes.
func (n *Node) checkEntryShape(e *raftpb.Entry) error {
	if l := len(e.GetData()); l > n.cfg.MaxEntryBytes {
		return fmt.Errorf("%w: %d bytes, the limit (MaxEntryBytes) is %d", ErrEntryTooLarge, l, n.cfg.MaxEntryBytes)
	}
	switch e.GetType() {
	case raftpb.EntryNormal:
	case raftpb.EntryConfChange:
		cc := &raftpb.ConfChange{}
		if err := proto.Unmarshal(e.GetData(), cc); err != nil {
			return fmt.Errorf("conf change does not decode: %w", err)
		}
		if cc.GetNodeId() == 0 && cc.GetType() != raftpb.ConfChangeRemoveNode {
			return errors.New("conf change names no node")
		}
		if t := cc.GetType(); t == raftpb.ConfChangeAddNode || t == raftpb.ConfChangeAddLearnerNode {
			if _, _, err := decodeMemberContext(cc.GetContext()); err != nil {
				return err
			}
		}
	case raftpb.EntryConfChangeV2:
		if err := proto.Unmarshal(e.GetData(), &raftpb.ConfChangeV2{}); err != nil {
			return fmt.Errorf("conf change v2 does not decode: %w", err)
		}
	default:
		return fmt.Errorf("unknown entry type %d", e.GetType())
	}
	return nil
}

// checkProposedEntry is checkEntryShape plus, for a command batch, that it
// decodes and every command can be stored: the leader appends only what
// every replica can apply.
func (n *Node) checkProposedEntry(e *raftpb.Entry) error {
	if err := n.checkEntryShape(e); err != nil {
		return err
	}
	if e.GetType() != raftpb.EntryNormal || len(e.GetData()) == 0 {
		return nil
	}
	_, _, cmds, err := decodeEnvelope(e.GetData())
	if err != nil {
		return err
	}
	for i := range cmds {
		if reason := invalidCommand(&cmds[i]); reason != "" {
			return fmt.Errorf("command %d: %s", i, reason)
		}
	}
	return nil
}

// checkSnapshotData walks snapshot data as restore would, without writing.
func checkSnapshotData(data []byte) error {
	if len(data) < len(snapMagic) || string(data[:len(snapMagic)]) != string(snapMagic) {
		return errors.New("snapshot data: bad magic or version")
	}
	p := data[len(snapMagic):]
	for {
		if len(p) == 0 {
			return errors.New("snapshot data: truncated")
		}
		bi := int(p[0])
		p = p[1:]
		if bi == 0 {
			return nil
		}
		if bi > len(allBuckets) {
			return fmt.Errorf("snapshot data: unknown bucket %d", bi)
		}
		var k, v []byte
		var ok bool
		if k, p, ok = readLP(p); !ok {
			return errors.New("snapshot data: bad key")
		}
		if v, p, ok = readLP(p); !ok {
			return errors.New("snapshot data: bad value")
		}
		if bi == 1 && string(k) == string(keyMembers) {
			if _, err := decodeMembers(v); err != nil {
				return fmt.Errorf("snapshot data: %w", err)
			}
		}
	}
}
