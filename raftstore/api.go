package raftstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/writ-dev/writ/kv"
)

// proposal is one proposed batch waiting for local apply.
type proposal struct {
	n   *Node
	req uint64
	// ids are the batch's command IDs: a snapshot that covers the batch
	// settles it from the restored outcome table.
	ids     []string
	done    chan struct{}
	once    sync.Once
	results []kv.Result
	err     error
}

func (p *proposal) finish(results []kv.Result, err error) {
	p.once.Do(func() {
		p.results, p.err = results, err
		close(p.done)
	})
}

// Wait blocks until the batch is applied on this node and returns one
// result per command. If ctx ends first the error wraps kv.ErrUnknown: the
// batch may still commit (query Outcome by command ID). If the node stops
// first the error wraps kv.ErrStopped (the batch may also still commit).
func (p *proposal) Wait(ctx context.Context) ([]kv.Result, error) {
	select {
	case <-p.done:
		return p.results, p.err
	case <-ctx.Done():
		p.n.mu.Lock()
		delete(p.n.waiters, p.req)
		p.n.mu.Unlock()
		select {
		case <-p.done:
			return p.results, p.err
		default:
		}
		return nil, fmt.Errorf("raftstore: wait: %w: %w", kv.ErrUnknown, ctx.Err())
	}
}

// Propose hands a batch to raft as one log entry; it does not block on
// the network or the disk. A nil error means only that raft accepted it (on
// a follower: forwarded it to the leader); use the Proposal's Wait for the
// outcome. Errors wrapping kv.ErrNoLeader or kv.ErrDropped mean the batch
// was definitely not appended.
func (n *Node) Propose(ctx context.Context, batch []kv.Command) (kv.Proposal, error) {
	if err := n.running(); err != nil {
		return nil, err
	}
	if len(batch) == 0 {
		return nil, errors.New("raftstore: propose: empty batch; pass at least one command")
	}
	for i := range batch {
		if reason := invalidCommand(&batch[i]); reason != "" {
			return nil, fmt.Errorf("raftstore: propose: batch[%d]: %s", i, reason)
		}
	}
	if n.leader.Load() == raft.None {
		return nil, n.mdropped(fmt.Errorf("raftstore: propose: %w", kv.ErrNoLeader))
	}
	req := n.reqSeq.Add(1)
	p := &proposal{n: n, req: req, done: make(chan struct{}), ids: make([]string, len(batch))}
	for i := range batch {
		p.ids[i] = batch[i].ID
	}
	n.mu.Lock()
	n.waiters[req] = p
	n.mu.Unlock()
	data := encodeEnvelope(n.id, req, batch)
	if len(data) > n.cfg.MaxEntryBytes {
		n.mu.Lock()
		delete(n.waiters, req)
		n.mu.Unlock()
		return nil, fmt.Errorf("raftstore: propose: %w: the batch of %d commands encodes to %d bytes, over MaxEntryBytes (%d); propose fewer or smaller commands at a time", ErrEntryTooLarge, len(batch), len(data), n.cfg.MaxEntryBytes)
	}
	if err := n.withRaft(func(rn *raft.RawNode) error { return rn.Propose(data) }); err != nil {
		n.mu.Lock()
		delete(n.waiters, req)
		n.mu.Unlock()
		return nil, n.proposeErr(err)
	}
	return p, nil
}

func (n *Node) proposeErr(err error) error {
	switch {
	case errors.Is(err, raft.ErrProposalDropped):
		if n.leader.Load() == raft.None {
			return n.mdropped(fmt.Errorf("raftstore: propose: %w", kv.ErrNoLeader))
		}
		return n.mdropped(fmt.Errorf("raftstore: propose: %w", kv.ErrDropped))
	case errors.Is(err, raft.ErrStopped):
		return n.stopErr()
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("raftstore: propose: %w: %w", kv.ErrUnknown, err)
	}
	return fmt.Errorf("raftstore: propose: %w", err)
}

// Get reads one key. Serializable reads (linearizable=false) return this
// node's applied state; linearizable reads first confirm a read index with
// a quorum (ReadIndex) and wait until it is applied here.
func (n *Node) Get(ctx context.Context, key string, linearizable bool) (kv.Record, bool, error) {
	if err := n.running(); err != nil {
		return kv.Record{}, false, err
	}
	if linearizable {
		if err := n.linearize(ctx); err != nil {
			return kv.Record{}, false, err
		}
	}
	rec, ok, err := n.st.get(key)
	if err != nil {
		return kv.Record{}, false, fmt.Errorf("raftstore: get %q: %w", key, err)
	}
	return rec, ok, nil
}

// GetMany reads several keys of this node's applied state in one read
// transaction (serializable, as Get with linearizable=false): dst[i] is the
// record of keys[i], or kv.Record{Key: keys[i]} when it is absent.
func (n *Node) GetMany(ctx context.Context, keys []string, dst []kv.Record) error {
	if err := n.running(); err != nil {
		return err
	}
	if len(dst) != len(keys) {
		return fmt.Errorf("raftstore: GetMany: %d keys but room for %d records", len(keys), len(dst))
	}
	if err := n.st.getMany(keys, dst); err != nil {
		return fmt.Errorf("raftstore: read %d keys: %w", len(keys), err)
	}
	return nil
}

// List reads every key with the prefix, in key order.
func (n *Node) List(ctx context.Context, prefix string, linearizable bool) ([]kv.Record, error) {
	if err := n.running(); err != nil {
		return nil, err
	}
	if linearizable {
		if err := n.linearize(ctx); err != nil {
			return nil, err
		}
	}
	recs, err := n.st.list(prefix)
	if err != nil {
		return nil, fmt.Errorf("raftstore: list %q: %w", prefix, err)
	}
	return recs, nil
}

// ReadBarrier confirms a read index with a quorum (ReadIndex) and waits
// until this node applied it: whatever a read of local state returns
// afterwards (Outcome, say) is at least as new as every write committed
// before the call, as for a linearizable Get.
func (n *Node) ReadBarrier(ctx context.Context) error {
	if err := n.running(); err != nil {
		return err
	}
	return n.linearize(ctx)
}

// Outcome returns the recorded result for a command ID, if retained.
func (n *Node) Outcome(id string) (kv.Result, bool) {
	if n.running() != nil {
		return kv.Result{}, false
	}
	return n.st.outcome(id)
}

// Status reports leadership and progress.
func (n *Node) Status() kv.LogStatus {
	lead := n.leader.Load()
	s := kv.LogStatus{
		NodeID:   n.cfg.NodeID,
		IsLeader: n.IsLeader(),
		Term:     n.term.Load(),
		Commit:   n.commit.Load(),
		Applied:  n.applied.Load(),
	}
	if lead != raft.None {
		n.mu.Lock()
		s.LeaderID = n.members[lead].ID
		n.mu.Unlock()
	}
	return s
}

// StateHash returns the applied index and a digest of the replicated state
// (keys, values, revisions, retained outcomes). Replicas at the same applied
// index have equal digests.
func (n *Node) StateHash() (uint64, [32]byte, error) {
	if err := n.running(); err != nil {
		return 0, [32]byte{}, err
	}
	return n.st.hash()
}

// IsLeader reports whether this node is the raft leader.
func (n *Node) IsLeader() bool { return n.running() == nil && n.isLeader.Load() }

// Members lists the consensus configuration in ID order. On the leader,
// Match is the member's replicated index.
func (n *Node) Members() []kv.Member {
	n.mu.Lock()
	out := make([]kv.Member, 0, len(n.members))
	ids := make([]uint64, 0, len(n.members))
	for id, m := range n.members {
		out = append(out, kv.Member{ID: m.ID, RaftAddr: m.Addr, Voter: !m.Learner, Incarnation: m.Inc})
		ids = append(ids, id)
	}
	n.mu.Unlock()
	if n.IsLeader() {
		var st raft.Status
		_ = n.withRaft(func(rn *raft.RawNode) error { st = rn.Status(); return nil })
		for i, id := range ids {
			if pr, ok := st.Progress[id]; ok {
				out[i].Match = pr.Match
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (n *Node) member(id string) (memberInfo, bool, error) {
	rid := RaftID(id)
	n.mu.Lock()
	defer n.mu.Unlock()
	m, ok := n.members[rid]
	if ok && m.ID != id {
		return m, ok, fmt.Errorf("raftstore: node ID %q maps to the same raft ID as member %q; choose another ID", id, m.ID)
	}
	return m, ok, nil
}

// AddLearner adds a non-voting member that receives the log. It is a no-op
// if id is already a learner at raftAddr. It returns once the change is
// applied on this node. It records no incarnation for the member: prefer
// AddLearnerIncarnation.
func (n *Node) AddLearner(ctx context.Context, id, raftAddr string) error {
	return n.AddLearnerIncarnation(ctx, id, raftAddr, 0)
}

// AddLearnerIncarnation adds a non-voting member that receives the log,
// recording inc, the incarnation the node announces (its Incarnation; 0:
// unknown). It is a no-op if id is already a learner of that incarnation
// at raftAddr. A member of another recorded incarnation is a node that
// was rebuilt under the same name while its predecessor still holds the
// seat: it is refused, remove the predecessor first (its raft ID is the
// same, and the leader's view of that ID's log belongs to the
// predecessor). It returns once the change is applied on this node.
func (n *Node) AddLearnerIncarnation(ctx context.Context, id, raftAddr string, inc uint64) error {
	if id == "" || raftAddr == "" {
		return errors.New("raftstore: add learner: id and raftAddr are required")
	}
	m, ok, err := n.member(id)
	if err != nil {
		return err
	}
	if ok {
		if inc != 0 && m.Inc != 0 && m.Inc != inc {
			return fmt.Errorf("raftstore: add learner: %q is a member as incarnation %016x, not %016x: remove that earlier incarnation first", id, m.Inc, inc)
		}
		if !m.Learner {
			return fmt.Errorf("raftstore: add learner: %q is already a voter", id)
		}
		if m.Addr == raftAddr && (inc == 0 || m.Inc == inc) {
			return nil
		}
	}
	return n.confChange(ctx, &raftpb.ConfChange{
		Type: new(raftpb.ConfChangeAddLearnerNode), NodeId: new(RaftID(id)),
		Context: encodeMemberContextInc(id, raftAddr, inc),
	})
}

// Promote turns a learner into a voter. It is a no-op for a voter.
func (n *Node) Promote(ctx context.Context, id string) error {
	m, ok, err := n.member(id)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("raftstore: promote: %q is not a member; add it as a learner first", id)
	}
	if !m.Learner {
		return nil
	}
	return n.confChange(ctx, &raftpb.ConfChange{
		Type: new(raftpb.ConfChangeAddNode), NodeId: new(RaftID(id)),
		Context: encodeMemberContextInc(id, m.Addr, m.Inc),
	})
}

// Remove removes a member. It is a no-op for a non-member. The leader
// cannot remove itself (transfer leadership first), and the last voter
// cannot be removed.
func (n *Node) Remove(ctx context.Context, id string) error {
	m, ok, err := n.member(id)
	if err != nil {
		return err
	}
	if !ok {
		return nil
	}
	if RaftID(id) == n.id {
		return fmt.Errorf("raftstore: remove: %q is this node (the leader); transfer leadership first", id)
	}
	if !m.Learner {
		voters := 0
		n.mu.Lock()
		for _, mm := range n.members {
			if !mm.Learner {
				voters++
			}
		}
		n.mu.Unlock()
		if voters <= 1 {
			return fmt.Errorf("raftstore: remove: %q is the last voter", id)
		}
	}
	return n.confChange(ctx, &raftpb.ConfChange{
		Type: new(raftpb.ConfChangeRemoveNode), NodeId: new(RaftID(id)),
		Context: encodeMemberContextInc(id, m.Addr, m.Inc),
	})
}

// confChange proposes one configuration change and waits until it is
// applied here. Only one runs at a time, and only on the leader.
func (n *Node) confChange(ctx context.Context, cc *raftpb.ConfChange) error {
	n.ccMu.Lock()
	defer n.ccMu.Unlock()
	if err := n.running(); err != nil {
		return err
	}
	if !n.isLeader.Load() {
		return fmt.Errorf("raftstore: conf change: %w", ErrNotLeader)
	}
	// raft refuses a conf change (it turns it into an empty entry) while it
	// has not itself marked the previous one applied. Entries are applied
	// here before the applier reports them to raft, so wait for raft to catch up
	// with what this node applied, which includes the previous change.
	for applied := n.applied.Load(); n.raftApplied() < applied; {
		select {
		case <-ctx.Done():
			return fmt.Errorf("raftstore: conf change: %w", ctx.Err())
		case <-n.stopc:
			return n.stopErr()
		case <-time.After(time.Millisecond):
		}
	}
	ccID := rand.Uint64() | 1
	cc.Id = new(ccID)
	ch := make(chan struct{})
	n.mu.Lock()
	n.ccWaiters[ccID] = ch
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		delete(n.ccWaiters, ccID)
		n.mu.Unlock()
	}()
	if err := n.withRaft(func(rn *raft.RawNode) error { return rn.ProposeConfChange(cc) }); err != nil {
		return fmt.Errorf("raftstore: conf change: %w", n.proposeErr(err))
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("raftstore: conf change: %w: %w", kv.ErrUnknown, ctx.Err())
	case <-n.stopc:
		return n.stopErr()
	}
}

// raftApplied is the applied index raft has recorded (the applier reports it).
func (n *Node) raftApplied() uint64 {
	var applied uint64
	_ = n.withRaft(func(rn *raft.RawNode) error { applied = rn.BasicStatus().Applied; return nil })
	return applied
}

// TransferLeadership asks the leader to hand leadership to toID and waits
// until this node sees toID as leader.
func (n *Node) TransferLeadership(ctx context.Context, toID string) error {
	m, ok, err := n.member(toID)
	if err != nil {
		return err
	}
	if !ok || m.Learner {
		return fmt.Errorf("raftstore: transfer leadership: %q is not a voter", toID)
	}
	to := RaftID(toID)
	tick := time.NewTicker(n.cfg.TickInterval)
	defer tick.Stop()
	for {
		if err := n.running(); err != nil {
			return err
		}
		lead := n.leader.Load()
		if lead == to {
			return nil
		}
		if lead != raft.None {
			_ = n.withRaft(func(rn *raft.RawNode) error { rn.TransferLeader(to); return nil })
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("raftstore: transfer leadership to %q: %w", toID, ctx.Err())
		}
	}
}

// CommitIndex is this node's commit index (on the leader: the cluster's).
func (n *Node) CommitIndex() uint64 { return n.commit.Load() }
