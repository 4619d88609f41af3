package raftstore

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/writ-dev/writ/kv"
)

// FuzzStepRandomMessages steps random raft messages, received as the
// transport receives them (decode the frame, check, step), into a real
// single-node raftstore (WAL, bbolt, raft) that is serving. The input is
// a transport frame or, when it is none, the fields of one message: type,
// sender, term, index, log term, commit, rejection, and entries of every
// type with fuzzed data. Nothing may panic, and the node must never stop:
// what is malformed is refused, what raft accepts must be applicable.
func FuzzStepRandomMessages(f *testing.F) {
	c := newCluster(f, 1, nil)
	n := c.nodes[c.leader(10*time.Second)]
	mustPropose(f, n, put("seed", "k", "v"))
	f.Add([]byte{byte(raftpb.MsgHeartbeat), 0, 0, 0, 0, 0xff, 0})
	f.Add([]byte{byte(raftpb.MsgProp), 1, 0, 0, 0, 0, 0, 1, 0, 3, 9, 9, 9})
	f.Add([]byte{byte(raftpb.MsgProp), 1, 0, 0, 0, 0, 0, 1, 1, 2, 0xff, 0xff})
	f.Add([]byte{byte(raftpb.MsgApp), 0, 1, 5, 1, 6, 0, 1, 0, 1, 7})
	f.Add([]byte{byte(raftpb.MsgSnap), 0, 1, 200, 1, 0, 0, 0})
	f.Add([]byte{byte(raftpb.MsgVote), 2, 3, 100, 100, 0, 0, 0})
	f.Add(encodeEnvelope(1, 2, []kv.Command{put("a", "b", "c")}))
	peers := []uint64{RaftID("n2"), n.id, 0, RaftID("n9")}
	iter := 0
	f.Fuzz(func(t *testing.T, in []byte) {
		iter++
		msgs, err := decodeFrame(in)
		if err != nil {
			msgs = []*raftpb.Message{messageFromBytes(n.id, n.term.Load(), peers, in)}
		}
		for _, m := range msgs {
			if err := n.check(m); err != nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			_ = n.step(ctx, m)
			cancel()
		}
		if iter%32 == 0 {
			time.Sleep(5 * time.Millisecond) // let the node apply what was accepted
		}
		select {
		case <-n.Done():
			t.Fatalf("node stopped after message %x: %v", in, n.Err())
		default:
		}
	})
}

// messageFromBytes builds one raft message to node self from fuzz input.
func messageFromBytes(self, term uint64, peers []uint64, in []byte) *raftpb.Message {
	next := func() byte {
		if len(in) == 0 {
			return 0
		}
		b := in[0]
		in = in[1:]
		return b
	}
	m := &raftpb.Message{Type: raftpb.MessageType(next() % 23).Enum(), To: new(self)}
	m.From = new(peers[int(next())%len(peers)])
	m.Term = new(term + uint64(next()%4))
	m.Index = new(uint64(next()))
	m.LogTerm = new(uint64(next() % 8))
	m.Commit = new(uint64(next()))
	m.Reject = new(next()%2 == 1)
	for range next() % 4 {
		typ := raftpb.EntryType(next() % 4)
		l := int(next())
		data := in[:min(l, len(in))]
		in = in[len(data):]
		m.Entries = append(m.Entries, &raftpb.Entry{Type: typ.Enum(), Term: new(m.GetTerm()), Index: new(m.GetIndex() + uint64(len(m.Entries)) + 1), Data: data})
	}
	if m.GetType() == raftpb.MsgSnap {
		idx := binary.BigEndian.Uint64(append(make([]byte, 8), in...)[len(in):][:8])
		m.Snapshot = &raftpb.Snapshot{Data: in, Metadata: &raftpb.SnapshotMetadata{Index: new(idx), Term: new(m.GetTerm()), ConfState: &raftpb.ConfState{Voters: []uint64{self}}}}
	}
	return m
}
