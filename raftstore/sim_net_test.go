package raftstore

import (
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// The simulation's network: every message a node sends is marshalled (as
// the transport does) into one shared in-flight set, from which the world
// delivers a message of its choosing once its delay has passed: so messages
// are reordered, and the fault plan drops, duplicates and delays them, and
// partitions cut them both at send and at delivery. What the real transport
// does on the sending side is done here too: a MsgSnap gets its data from
// the sender's state (fillSnapshot) and its outcome reported back, and a
// message to a peer it cannot reach is reported unreachable.

type simMsg struct {
	from, to uint64
	at       int // the step from which it may be delivered
	data     []byte
	snap     bool
}

// simReport is a callback the transport owes the sender (reportSnapshot,
// reportUnreachable), run by the world after the round that caused it.
type simReport struct {
	node, peer  uint64
	snapshot    bool
	status      raft.SnapshotStatus
	unreachable bool
}

type simNet struct {
	w        *world
	inflight []simMsg
	reports  []simReport
	sent     int
	dropped  int
	duped    int
	refused  int
}

// simEndpoint is one node's peerNet.
type simEndpoint struct {
	net     *simNet
	self    uint64
	peers   map[uint64]bool
	members map[uint64]bool
	closed  bool
}

func (e *simEndpoint) send(msgs []*raftpb.Message) {
	if e.closed {
		return
	}
	sn := e.net
	w := sn.w
	for _, m := range msgs {
		to := m.GetTo()
		if !e.peers[to] {
			continue
		}
		isSnap := m.GetType() == raftpb.MsgSnap
		if isSnap {
			node := w.byID[e.self].n
			if err := node.fillSnapshot(m); err != nil {
				w.tracef("n%x: fill snapshot for %x: %v", e.self, to, err)
				sn.reports = append(sn.reports, simReport{node: e.self, peer: to, snapshot: true, status: raft.SnapshotFailure})
				continue
			}
		}
		sn.sent++
		if w.cut(e.self, to) || w.chance(w.plan.drop) {
			sn.dropped++
			if w.cut(e.self, to) {
				sn.reports = append(sn.reports, simReport{node: e.self, peer: to, unreachable: true})
			}
			if isSnap {
				sn.reports = append(sn.reports, simReport{node: e.self, peer: to, snapshot: true, status: raft.SnapshotFailure})
			}
			continue
		}
		data, err := proto.Marshal(m)
		if err != nil {
			w.failf("marshal %s from %x: %v", m.GetType(), e.self, err)
			return
		}
		copies := 1
		if w.chance(w.plan.dup) {
			copies = 2
			sn.duped++
		}
		for range copies {
			sn.inflight = append(sn.inflight, simMsg{from: e.self, to: to, at: w.step + w.rng.IntN(w.plan.maxDelay+1), data: data, snap: isSnap})
		}
		if isSnap {
			sn.reports = append(sn.reports, simReport{node: e.self, peer: to, snapshot: true, status: raft.SnapshotFinish})
		}
	}
}

func (e *simEndpoint) setPeer(id uint64, _ string) { e.peers[id] = true }
func (e *simEndpoint) removePeer(id uint64)        { delete(e.peers, id) }
func (e *simEndpoint) syncMembers(ids []uint64) {
	e.members = map[uint64]bool{}
	for _, id := range ids {
		e.members[id] = true
	}
}
func (e *simEndpoint) close() { e.closed = true }

// deliverable lists the indexes of the messages whose delay has passed.
func (sn *simNet) deliverable(buf []int) []int {
	buf = buf[:0]
	for i, m := range sn.inflight {
		if m.at <= sn.w.step {
			buf = append(buf, i)
		}
	}
	return buf
}

// deliver hands in-flight message i to its node as the transport's
// receiving side does: decode, check, admit members only, step.
func (sn *simNet) deliver(i int) {
	w := sn.w
	m := sn.inflight[i]
	sn.inflight = append(sn.inflight[:i], sn.inflight[i+1:]...)
	dst := w.byID[m.to]
	if dst == nil || dst.n == nil || w.cut(m.from, m.to) {
		sn.dropped++
		return
	}
	msg := &raftpb.Message{}
	if err := proto.Unmarshal(m.data, msg); err != nil {
		w.failf("unmarshal a message from %x: %v", m.from, err)
		return
	}
	if err := dst.n.check(msg); err != nil {
		// The transport drops the stream; the sender's raft retries.
		sn.refused++
		w.tracef("n%x refused %s from %x: %v", m.to, msg.GetType(), m.from, err)
		return
	}
	if !dst.ep.members[m.from] {
		sn.dropped++
		return
	}
	if err := dst.n.step(w.ctx, msg); err != nil {
		w.failf("n%x: step %s from %x: %v", m.to, msg.GetType(), m.from, err)
	}
}

// runReports runs the callbacks owed to senders that are still up.
func (sn *simNet) runReports() {
	reps := sn.reports
	sn.reports = nil
	for _, r := range reps {
		sd := sn.w.byID[r.node]
		if sd == nil || sd.n == nil {
			continue
		}
		if r.unreachable {
			sd.n.reportUnreachable(r.peer)
		}
		if r.snapshot {
			sd.n.reportSnapshot(r.peer, r.status)
		}
	}
}
