package sim

import (
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// network delivers raft messages between nodes after a delay drawn from
// the seed; while faults are on it drops, duplicates and delays (reorders)
// them, and cuts directed links (a partition cuts both directions, a
// one-way partition one).
type network struct {
	w       *World
	cut     [][]bool // cut[from][to]
	drop    float64
	dup     float64
	reorder float64
}

func (nw *network) send(from *node, m *raftpb.Message) {
	w := nw.w
	to := int(m.GetTo()) - 1
	if to < 0 || to >= len(w.nodes) {
		return
	}
	w.stats.Messages++
	switch {
	case nw.cut[from.idx][to]:
		w.stats.Faults["partition-drop"]++
		nw.lost(from, m)
		return
	case nw.drop > 0 && w.rng.Float64() < nw.drop:
		w.stats.Faults["drop"]++
		nw.lost(from, m)
		return
	}
	copies := 1
	if nw.dup > 0 && w.rng.Float64() < nw.dup {
		w.stats.Faults["duplicate"]++
		copies = 2
	}
	for range copies {
		d := w.netDelay()
		if nw.reorder > 0 && w.rng.Float64() < nw.reorder {
			w.stats.Faults["delay"]++
			d += time.Duration(w.rng.Int63n(int64(20 * w.cfg.Tick)))
		}
		msg := proto.Clone(m).(*raftpb.Message)
		w.after(d, func() { nw.deliver(from, to, msg) })
	}
}

// lost tells the sender's raft, as raftstore's transport does, that a
// snapshot did not get through.
func (nw *network) lost(from *node, m *raftpb.Message) {
	if m.GetType() == raftpb.MsgSnap && from.up {
		from.rn.ReportUnreachable(m.GetTo())
		from.rn.ReportSnapshot(m.GetTo(), raft.SnapshotFailure)
	}
}

func (nw *network) deliver(from *node, to int, m *raftpb.Message) {
	w := nw.w
	dst := w.nodes[to]
	if !dst.up || nw.cut[from.idx][to] {
		w.stats.Faults["partition-drop"] += boolInt(dst.up)
		nw.lost(from, m)
		return
	}
	w.traceEvent("deliver", uint64(from.idx)<<8|uint64(to), uint64(m.GetType())<<48|m.GetTerm()<<24|m.GetIndex())
	if err := dst.rn.Step(m); err != nil && err != raft.ErrStepPeerNotFound && err != raft.ErrStepLocalMsg && err != raft.ErrProposalDropped {
		w.fail("%s: step %s from %s: %v", dst.name, m.GetType(), from.name, err)
	}
	if m.GetType() == raftpb.MsgSnap && from.up {
		from.rn.ReportSnapshot(uint64(to+1), raft.SnapshotFinish)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
