package raftstore

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/writ-dev/writ/internal/proctest"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	grpcpeer "google.golang.org/grpc/peer"
)

// recorder is a raftHandler that records what the real transport does.
type recorder struct {
	mu          sync.Mutex
	got         []*raftpb.Message
	remotes     map[string]bool
	unreachable int
	snapStatus  []raft.SnapshotStatus
	notices     []removal
}

func (r *recorder) check(*raftpb.Message) error { return nil }

func (r *recorder) step(ctx context.Context, m *raftpb.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, m)
	if p, ok := grpcpeer.FromContext(ctx); ok {
		if r.remotes == nil {
			r.remotes = map[string]bool{}
		}
		host, _, _ := net.SplitHostPort(p.Addr.String())
		r.remotes[host] = true
	}
	return nil
}
func (r *recorder) reportUnreachable(uint64) { r.mu.Lock(); r.unreachable++; r.mu.Unlock() }
func (r *recorder) reportSnapshot(_ uint64, s raft.SnapshotStatus) {
	r.mu.Lock()
	r.snapStatus = append(r.snapStatus, s)
	r.mu.Unlock()
}

// fillSnapshot leaves a test snapshot as it was queued.
func (r *recorder) fillSnapshot(*raftpb.Message) error { return nil }

func (r *recorder) removedByPeer(peer uint64, rm removal) {
	r.mu.Lock()
	r.notices = append(r.notices, rm)
	r.mu.Unlock()
}

func (r *recorder) count() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.got) }

func msg(to uint64, i uint64) *raftpb.Message {
	return &raftpb.Message{Type: new(raftpb.MsgHeartbeat), To: new(to), From: new(uint64(1)), Term: new(i)}
}

// TestTransportBoundsQueueReconnectsAndBinds runs two real transports over
// loopback: while the peer is down, the sender's queue stays bounded and
// overflow is reported unreachable; once the peer listens, the sender
// reconnects (with backoff) and delivers in order from its bound address.
func TestTransportBoundsQueueReconnectsAndBinds(t *testing.T) {
	lisB := listen(t, loopback(8))
	addrB := lisB.Addr().String()
	lisB.Close() // nothing listens there yet

	ra := &recorder{}
	a := newTransport(1, listen(t, loopback(7)), transportLimits{queue: 64, batch: 1 << 20, frame: 64 << 20}, ra, testLogger(t), peerSecurity{})
	defer a.close()
	a.setPeer(2, addrB)
	for i := range 10000 {
		a.send([]*raftpb.Message{msg(2, uint64(i))})
	}
	a.mu.Lock()
	qlen := len(a.peers[2].q)
	a.mu.Unlock()
	if qlen > 64 {
		t.Fatalf("queue grew to %d", qlen)
	}
	ra.mu.Lock()
	if ra.unreachable < 10000-64-1 {
		t.Fatalf("overflow not reported: %d unreachable", ra.unreachable)
	}
	ra.mu.Unlock()
	// Messages to an unknown peer are reported too (and a snapshot fails).
	a.send([]*raftpb.Message{{Type: new(raftpb.MsgSnap), To: new(uint64(9))}})
	ra.mu.Lock()
	if len(ra.snapStatus) != 1 || ra.snapStatus[0] != raft.SnapshotFailure {
		t.Fatalf("snapshot to unknown peer: %v", ra.snapStatus)
	}
	ra.mu.Unlock()

	time.Sleep(300 * time.Millisecond) // a few failed dials
	var lis net.Listener
	var err error
	for range 50 {
		if lis, err = net.Listen("tcp", addrB); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	rb := &recorder{}
	b := newTransport(2, lis, transportLimits{queue: 64, batch: 1 << 20, frame: 64 << 20}, rb, testLogger(t), peerSecurity{})
	defer b.close()
	// New traffic after the peer came up is delivered, in order.
	proctest.WaitFor(t, 10*time.Second, "reconnect", func() bool {
		a.send([]*raftpb.Message{msg(2, 1_000_000)})
		return rb.count() > 0
	})
	base := rb.count()
	// Within the queue bound nothing is lost: 10 rounds of 50 messages,
	// each sent as one burst (batched into frames) and delivered in full.
	for round := range 10 {
		batch := make([]*raftpb.Message, 50)
		for i := range batch {
			batch[i] = msg(2, uint64(2_000_000+round*50+i))
		}
		a.send(batch)
		proctest.WaitFor(t, 5*time.Second, "delivery", func() bool { return rb.count() >= base+(round+1)*50 })
	}
	rb.mu.Lock()
	var last uint64
	for _, m := range rb.got[base:] {
		if m.GetTerm() < last {
			t.Fatalf("out of order: %d after %d", m.GetTerm(), last)
		}
		last = m.GetTerm()
	}
	if len(rb.remotes) != 1 || !rb.remotes[loopback(7)] {
		t.Fatalf("outgoing connections not bound to the configured address: %v", rb.remotes)
	}
	rb.mu.Unlock()
	// Snapshots to one peer are rate limited: the second, right after the
	// first, is reported failed (raft retries later), the first delivered.
	ra.mu.Lock()
	ra.snapStatus = nil
	ra.mu.Unlock()
	snapMsg := func() *raftpb.Message {
		return &raftpb.Message{Type: new(raftpb.MsgSnap), To: new(uint64(2)), From: new(uint64(1)), Snapshot: &raftpb.Snapshot{Data: []byte("state")}}
	}
	a.send([]*raftpb.Message{snapMsg(), snapMsg()})
	proctest.WaitFor(t, 5*time.Second, "snapshot statuses", func() bool {
		ra.mu.Lock()
		defer ra.mu.Unlock()
		return len(ra.snapStatus) == 2
	})
	ra.mu.Lock()
	// The two reports may arrive in either order (the delivered one can
	// finish before the throttled one is reported); exactly one of each.
	if !((ra.snapStatus[0] == raft.SnapshotFailure && ra.snapStatus[1] == raft.SnapshotFinish) ||
		(ra.snapStatus[0] == raft.SnapshotFinish && ra.snapStatus[1] == raft.SnapshotFailure)) {
		t.Fatalf("snapshot statuses %v, want one failure (throttled) and one finish", ra.snapStatus)
	}
	ra.mu.Unlock()
	// The receiver learned the sender's address from the stream header.
	b.mu.Lock()
	p, ok := b.peers[1]
	b.mu.Unlock()
	if !ok || p.addr != a.addr {
		t.Fatalf("receiver did not learn sender address: %v %+v", ok, p)
	}
}

// propBlocker is a raftHandler whose step blocks proposals until their
// context ends, like raft does while the node knows no leader.
type propBlocker struct{ recorder }

func (r *propBlocker) step(ctx context.Context, m *raftpb.Message) error {
	if m.GetType() == raftpb.MsgProp {
		<-ctx.Done()
		return ctx.Err()
	}
	return r.recorder.step(ctx, m)
}

// TestTransportProposalsDoNotStallTheStream: a forwarded proposal that raft
// cannot accept (no leader) must not hold up the messages behind it on the
// same stream (the heartbeats that would tell the node its leader).
func TestTransportProposalsDoNotStallTheStream(t *testing.T) {
	ra, rb := &recorder{}, &propBlocker{}
	a := newTransport(1, listen(t, loopback(7)), transportLimits{queue: 4096, batch: 1 << 20, frame: 64 << 20}, ra, testLogger(t), peerSecurity{})
	defer a.close()
	b := newTransport(2, listen(t, loopback(8)), transportLimits{queue: 4096, batch: 1 << 20, frame: 64 << 20}, rb, testLogger(t), peerSecurity{})
	defer b.close()
	a.setPeer(2, b.addr)
	var msgs []*raftpb.Message
	for i := range 2000 {
		msgs = append(msgs, &raftpb.Message{Type: new(raftpb.MsgProp), To: new(uint64(2)), From: new(uint64(1)),
			Entries: []*raftpb.Entry{{Data: []byte("proposal")}}, Term: new(uint64(i))})
	}
	msgs = append(msgs, msg(2, 7))
	a.send(msgs)
	proctest.WaitFor(t, 5*time.Second, "heartbeat behind 2000 blocked proposals", func() bool { return rb.count() > 0 })
}
