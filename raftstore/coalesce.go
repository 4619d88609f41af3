package raftstore

import (
	"go.etcd.io/raft/v3/raftpb"
)

// coalesce merges, per destination, raft messages that say the same thing
// twice in one Ready:
//
//   - consecutive appends (MsgApp) of one term whose entries are
//     contiguous become one append carrying all the entries and the later
//     commit index (raft emits one append per proposal; the follower would
//     answer each);
//   - consecutive successful append responses (MsgAppResp) of one term
//     become the one with the highest index (each acknowledges everything
//     up to its index).
//
// A message is only merged into the last message already kept for the same
// destination, so each peer still sees its messages in raft's order; what
// disappears is exactly what the kept message implies, as if those
// messages had been lost, which raft tolerates. Merged appends stop growing
// at maxBytes of entry data.
func coalesce(msgs []*raftpb.Message, maxBytes int) []*raftpb.Message {
	if len(msgs) < 2 {
		return msgs
	}
	type kept struct {
		to  uint64
		i   int // index in out of the last message kept for to
		own int // entry bytes of a merged append built here, -1 if none
	}
	var peers [8]kept
	last := peers[:0]
	out := make([]*raftpb.Message, 0, len(msgs))
	for _, m := range msgs {
		to := m.GetTo()
		k := -1
		for j := range last {
			if last[j].to == to {
				k = j
				break
			}
		}
		if k >= 0 {
			prev := out[last[k].i]
			switch {
			case canMergeApp(prev, m):
				size := last[k].own
				if size < 0 {
					size = entriesBytes(prev.GetEntries())
				}
				add := entriesBytes(m.GetEntries())
				if size+add > maxBytes {
					break
				}
				if last[k].own < 0 {
					// Never append into raft's slices: copy the header and
					// start a new entries slice.
					prev = &raftpb.Message{
						Type: prev.Type, To: prev.To, From: prev.From, Term: prev.Term,
						LogTerm: prev.LogTerm, Index: prev.Index, Commit: prev.Commit,
						Entries: append(make([]*raftpb.Entry, 0, 2*(len(prev.GetEntries())+len(m.GetEntries()))), prev.GetEntries()...),
					}
					out[last[k].i] = prev
				}
				prev.Entries = append(prev.Entries, m.GetEntries()...)
				prev.Commit = m.Commit
				last[k].own = size + add
				continue
			case canMergeAppResp(prev, m):
				out[last[k].i] = m
				continue
			}
			last[k] = kept{to: to, i: len(out), own: -1}
		} else {
			last = append(last, kept{to: to, i: len(out), own: -1})
		}
		out = append(out, m)
	}
	return out
}

func canMergeApp(prev, m *raftpb.Message) bool {
	if prev.GetType() != raftpb.MsgApp || m.GetType() != raftpb.MsgApp || prev.GetTerm() != m.GetTerm() ||
		len(prev.GetEntries()) == 0 || len(m.GetEntries()) == 0 || m.GetCommit() < prev.GetCommit() {
		return false
	}
	ents := prev.GetEntries()
	lastEnt := ents[len(ents)-1]
	return m.GetIndex() == lastEnt.GetIndex() && m.GetLogTerm() == lastEnt.GetTerm()
}

func canMergeAppResp(prev, m *raftpb.Message) bool {
	return prev.GetType() == raftpb.MsgAppResp && m.GetType() == raftpb.MsgAppResp &&
		!prev.GetReject() && !m.GetReject() && prev.GetTerm() == m.GetTerm() &&
		m.GetIndex() >= prev.GetIndex()
}

func entriesBytes(ents []*raftpb.Entry) int {
	n := 0
	for _, e := range ents {
		n += len(e.GetData()) + 24
	}
	return n
}
