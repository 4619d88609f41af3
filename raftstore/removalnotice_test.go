package raftstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/writ-dev/writ/internal/proctest"
)

// noticeNet is the loopback /24 of the removal-notice tests.
func noticeNet() string {
	if v := os.Getenv("WRITTEST_NOTICE_NET"); v != "" {
		return v
	}
	return "127.0.99"
}

// TestRemovedMemberThatMissedItsRemovalStops removes a voter whose every
// incoming message is lost from the moment of its removal, so it never
// learns from the log that the removal committed. Its peers tell it when
// it next reaches them, and it stops with ErrRemoved before it applied
// the removal: once with incarnations on record (joiners), once without
// (a static initial configuration).
func TestRemovedMemberThatMissedItsRemovalStops(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(t *testing.T, hooks *testHooks) *cluster
	}{
		{"incarnations", func(t *testing.T, hooks *testHooks) *cluster {
			return newReplaceClusterHooks(t, 10000, 0, hooks)
		}},
		{"static-peers", func(t *testing.T, hooks *testHooks) *cluster {
			return newClusterOn(t, noticeNet(), 3, func(_ int, cfg *Config) { cfg.hooks = hooks })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cut atomic.Uint64 // raft ID whose incoming messages are lost; 0: none
			c := tc.start(t, &testHooks{dropMessage: func(m *raftpb.Message) bool {
				return m.GetTo() == cut.Load()
			}})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			li := c.leader(20 * time.Second)
			l := c.nodes[li]
			for i := range 5 {
				mustPropose(t, l, put(fmt.Sprintf("before-%d", i), fmt.Sprintf("k/before/%d", i), "v"))
			}
			c.converge(30 * time.Second)
			vi := (li + 1) % 3
			v := c.nodes[vi]
			cut.Store(v.id)
			if err := l.Remove(ctx, v.ID()); err != nil {
				t.Fatal(err)
			}
			removal := l.Status().Commit
			proctest.WaitFor(t, 30*time.Second, v.ID()+" stops, told of its removal", func() bool { return !c.alive(vi) })
			if !errors.Is(v.Err(), ErrRemoved) {
				t.Fatalf("%s stopped with %v, want ErrRemoved", v.ID(), v.Err())
			}
			if got := v.applied.Load(); got >= removal {
				t.Fatalf("%s applied %d, at or past the removal at %d: it learned from the log, so the notice was not tested", v.ID(), got, removal)
			}
			// The rest of the cluster goes on without it.
			mustPropose(t, l, put("after", "k/after", "v"))
		})
	}
}

// TestRemovalNoticeStopsOnlyItsOwnIncarnation hands a real node the
// notices its peers can send: one about an earlier incarnation under its
// name, or about a removal it applied past, leaves it running; one that
// names its own incarnation stops it with ErrRemoved.
func TestRemovalNoticeStopsOnlyItsOwnIncarnation(t *testing.T) {
	c := newClusterOn(t, noticeNet(), 1, nil)
	n := c.nodes[c.leader(20*time.Second)]
	mustPropose(t, n, put("p", "k/p", "v"))
	applied := n.applied.Load()
	if applied == 0 || n.Incarnation() == 0 {
		t.Fatalf("applied %d, incarnation %x", applied, n.Incarnation())
	}
	for _, r := range []removal{
		{inc: n.Incarnation() + 1, index: applied + 100}, // a predecessor's removal, not applied yet
		{inc: 0, index: applied},                         // no incarnation recorded, applied past it
	} {
		n.removedByPeer(9, r)
		time.Sleep(100 * time.Millisecond)
		if !c.alive(0) {
			t.Fatalf("stopped on a notice %+v that is not about this node (incarnation %x, applied %d): %v", r, n.Incarnation(), applied, n.Err())
		}
	}
	n.removedByPeer(9, removal{inc: n.Incarnation(), index: applied})
	proctest.WaitFor(t, 10*time.Second, "the node stops on its own removal", func() bool { return !c.alive(0) })
	if !errors.Is(n.Err(), ErrRemoved) {
		t.Fatalf("stopped with %v, want ErrRemoved", n.Err())
	}
}

// TestTransport_FakeRaftRemovedPeerIsToldOnSendAndOnOpen runs two real
// transports with a recording raft handler: once A has removed B, B's next
// message ends its stream with a notice naming the removal, and so does
// every stream B opens later, even one that never carries a message.
func TestTransport_FakeRaftRemovedPeerIsToldOnSendAndOnOpen(t *testing.T) {
	lim := transportLimits{queue: 64, batch: 1 << 20, frame: 64 << 20}
	ra, rb := &recorder{}, &recorder{}
	a := newTransport(1, listen(t, noticeNet()+".11"), lim, ra, testLogger(t), peerSecurity{})
	defer a.close()
	b := newTransport(2, listen(t, noticeNet()+".12"), lim, rb, testLogger(t), peerSecurity{})
	a.syncMembers([]uint64{1, 2})
	b.syncMembers([]uint64{1, 2})
	b.setPeer(1, a.addr)
	proctest.WaitFor(t, 10*time.Second, "delivery while a member", func() bool {
		b.send([]*raftpb.Message{{Type: new(raftpb.MsgHeartbeat), To: new(uint64(1)), From: new(uint64(2)), Term: new(uint64(1))}})
		return ra.count() > 0
	})
	notices := func(r *recorder) []removal {
		r.mu.Lock()
		defer r.mu.Unlock()
		return append([]removal(nil), r.notices...)
	}
	if got := notices(rb); len(got) != 0 {
		t.Fatalf("notices while a member: %+v", got)
	}
	a.removePeer(2, removal{inc: 0xabc, index: 42})
	a.syncMembers([]uint64{1})
	want := removal{inc: 0xabc, index: 42}
	proctest.WaitFor(t, 10*time.Second, "a notice on the next message", func() bool {
		b.send([]*raftpb.Message{{Type: new(raftpb.MsgHeartbeat), To: new(uint64(1)), From: new(uint64(2)), Term: new(uint64(2))}})
		got := notices(rb)
		return len(got) > 0 && got[0] == want
	})
	b.close()

	// A fresh transport for B that sends nothing: its stream's opening is
	// enough.
	rc := &recorder{}
	b2 := newTransport(2, listen(t, noticeNet()+".13"), lim, rc, testLogger(t), peerSecurity{})
	defer b2.close()
	b2.setPeer(1, a.addr)
	proctest.WaitFor(t, 10*time.Second, "a notice on an idle stream", func() bool {
		got := notices(rc)
		return len(got) > 0 && got[0] == want
	})
}
