package raftstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"go.etcd.io/raft/v3"

	"github.com/writ-dev/writ/kv"
)

// Linearizable reads share read indexes. A read must see every write
// committed before it started, so it needs a read index confirmed by a
// quorum after its start; any such index will do. Reads that arrive while a
// ReadIndex round is in flight therefore wait for the next round and share
// it: one heartbeat quorum serves every read that joined the batch, however
// many there are, and a lone read costs one round as before.

// readBatch is one ReadIndex round and the reads that share it.
type readBatch struct {
	done chan struct{} // closed when idx or err is set
	idx  uint64
	err  error
}

// readBatcher holds the batch being filled; at most one round is in flight.
type readBatcher struct {
	next    *readBatch // joined by new reads, not yet issued
	issuing bool       // a round is in flight (a read's own, or issueReads)
}

// linearize returns once this node applied a read index confirmed by a
// quorum after the call started.
func (n *Node) linearize(ctx context.Context) error {
	if n.leader.Load() == raft.None {
		return fmt.Errorf("raftstore: linearizable read: %w", kv.ErrNoLeader)
	}
	n.mu.Lock()
	if !n.rb.issuing {
		// No round in flight: this read runs its own, on its own
		// goroutine and context (a lone read pays no hand-off), and
		// hands the reads that arrived meanwhile to a goroutine.
		n.rb.issuing = true
		n.mu.Unlock()
		idx, err := n.readIndex(ctx)
		n.handOffReads()
		if err != nil {
			return err
		}
		return n.waitApplied(ctx, idx)
	}
	b := n.rb.next
	if b == nil {
		b = &readBatch{done: make(chan struct{})}
		n.rb.next = b
	}
	n.mu.Unlock()
	select {
	case <-b.done:
	case <-ctx.Done():
		return fmt.Errorf("raftstore: linearizable read: %w", ctx.Err())
	case <-n.stopc:
		return n.stopErr()
	}
	if b.err != nil {
		return b.err
	}
	return n.waitApplied(ctx, b.idx)
}

// handOffReads ends a round: the reads waiting for the next one get a
// goroutine that issues rounds while reads wait, or no round is in flight.
func (n *Node) handOffReads() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.rb.next == nil {
		n.rb.issuing = false
		return
	}
	go n.issueReads() // ends with the last waiting batch, or at stop
}

// issueReads runs ReadIndex rounds while reads are waiting for one, each
// round for every read that joined before it was issued.
func (n *Node) issueReads() {
	for {
		n.mu.Lock()
		b := n.rb.next
		n.rb.next = nil
		if b == nil {
			n.rb.issuing = false
			n.mu.Unlock()
			return
		}
		n.mu.Unlock()
		b.idx, b.err = n.readIndex(context.Background())
		close(b.done)
	}
}

// readIndex runs one ReadIndex round: the index a quorum confirmed.
// ctx ends the round early (a read's own round).
func (n *Node) readIndex(ctx context.Context) (uint64, error) {
	n.readRounds.Add(1)
	id := n.reqSeq.Add(1)
	rctx := binary.BigEndian.AppendUint64(nil, id)
	ch := make(chan uint64, 1)
	n.mu.Lock()
	n.reads[id] = ch
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		delete(n.reads, id)
		n.mu.Unlock()
	}()
	retry := time.NewTicker(10 * n.cfg.TickInterval)
	defer retry.Stop()
	// Bounded: a read waits at most its own context, so a round nobody
	// waits for any more is given up after a while (a later read starts a
	// new one).
	giveUp := time.NewTimer(readRoundLimit)
	defer giveUp.Stop()
	for {
		if err := n.withRaft(func(rn *raft.RawNode) error { rn.ReadIndex(rctx); return nil }); err != nil {
			return 0, fmt.Errorf("raftstore: linearizable read: %w", n.proposeErr(err))
		}
		select {
		case idx := <-ch:
			return idx, nil
		case <-retry.C:
			// Read index requests are dropped silently (no leader yet,
			// leader not yet committed in its term): ask again.
			if n.leader.Load() == raft.None {
				return 0, fmt.Errorf("raftstore: linearizable read: %w", kv.ErrNoLeader)
			}
		case <-ctx.Done():
			return 0, fmt.Errorf("raftstore: linearizable read: %w", ctx.Err())
		case <-giveUp.C:
			return 0, fmt.Errorf("raftstore: linearizable read: no read index confirmed within %s: %w", readRoundLimit, kv.ErrNoLeader)
		case <-n.stopc:
			return 0, n.stopErr()
		}
	}
}

// readRoundLimit bounds one ReadIndex round.
const readRoundLimit = 30 * time.Second
