package membership

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/writ-dev/writ/kv"
)

// fakeRaft is an in-memory model of a raft configuration, used by the tests
// named *_FakeVoters*. It models what the reconciler relies on:
//   - learners and voters; only a learner can be promoted;
//   - a configuration change takes commitDelay and only commits while the
//     alive voters form a majority of the current configuration (otherwise
//     it blocks until its context ends, like an uncommittable proposal);
//   - only one change may be in flight; a second concurrent one, or one
//     proposed by a non-leader, is recorded as a violation;
//   - the log advances every tick and alive members replicate it, so a new
//     learner starts at Match 0 and catches up on the next tick; promoting a
//     learner that has not caught up is recorded as a violation.
type fakeRaft struct {
	mu          sync.Mutex
	members     map[string]*kv.Member
	dead        map[string]bool // killed processes; every other node is reachable
	leader      string
	commit      uint64
	changing    bool
	commitDelay time.Duration
	history     []string // committed changes, in order
	attempts    []string // every change asked for, committed or not
	violations  []string
	voterCounts []int // number of voters after each committed change
	stop        chan struct{}
	stopOnce    sync.Once
}

func newFakeRaft(leader, raftAddr string) *fakeRaft {
	f := &fakeRaft{
		members:     map[string]*kv.Member{leader: {ID: leader, RaftAddr: raftAddr, Voter: true}},
		dead:        map[string]bool{},
		leader:      leader,
		commit:      1,
		commitDelay: 20 * time.Millisecond,
		stop:        make(chan struct{}),
	}
	go f.replicate()
	return f
}

func (f *fakeRaft) close() { f.stopOnce.Do(func() { close(f.stop) }) }

// replicate advances the log (client traffic) while a quorum is alive and
// lets every alive member catch up.
func (f *fakeRaft) replicate() {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
		}
		f.mu.Lock()
		if f.quorumAliveLocked() {
			f.commit++
			for id, m := range f.members {
				if !f.dead[id] {
					m.Match = f.commit
				}
			}
		}
		f.mu.Unlock()
	}
}

// setAlive marks a node as reachable for raft (a killed process is not).
func (f *fakeRaft) setAlive(id string, alive bool) {
	f.mu.Lock()
	f.dead[id] = !alive
	f.mu.Unlock()
}

func (f *fakeRaft) quorumAliveLocked() bool {
	voters, alive := 0, 0
	for id, m := range f.members {
		if m.Voter {
			voters++
			if !f.dead[id] {
				alive++
			}
		}
	}
	return alive >= voters/2+1
}

func (f *fakeRaft) votersLocked() int {
	n := 0
	for _, m := range f.members {
		if m.Voter {
			n++
		}
	}
	return n
}

// change runs one configuration change the way raft would.
func (f *fakeRaft) change(ctx context.Context, caller, desc string, check func() error, apply func()) error {
	f.mu.Lock()
	f.attempts = append(f.attempts, desc)
	if caller != f.leader || f.dead[caller] {
		f.violations = append(f.violations, fmt.Sprintf("%s proposed by non-leader %s", desc, caller))
		f.mu.Unlock()
		return errors.New("fake raft: not leader")
	}
	if f.changing {
		f.violations = append(f.violations, desc+" proposed while another change was in flight")
		f.mu.Unlock()
		return errors.New("fake raft: a configuration change is already pending")
	}
	if err := check(); err != nil {
		f.mu.Unlock()
		return err
	}
	f.changing = true
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.changing = false
		f.mu.Unlock()
	}()

	deadline := time.NewTimer(f.commitDelay)
	defer deadline.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("fake raft: %s not committed: %w", desc, ctx.Err())
		case <-deadline.C:
		}
		f.mu.Lock()
		if f.quorumAliveLocked() {
			apply()
			f.commit++
			f.members[f.leader].Match = f.commit
			f.history = append(f.history, desc)
			f.voterCounts = append(f.voterCounts, f.votersLocked())
			f.mu.Unlock()
			return nil
		}
		f.mu.Unlock()
		deadline.Reset(f.commitDelay)
	}
}

func (f *fakeRaft) node(id string) *fakeNode { return &fakeNode{f: f, id: id} }

func (f *fakeRaft) snapshot() (voters, learners []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, m := range f.members {
		if m.Voter {
			voters = append(voters, id)
		} else {
			learners = append(learners, id)
		}
	}
	sort.Strings(voters)
	sort.Strings(learners)
	return voters, learners
}

func (f *fakeRaft) report() (history, attempts, violations []string, voterCounts []int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.history...), append([]string(nil), f.attempts...), append([]string(nil), f.violations...), append([]int(nil), f.voterCounts...)
}

// fakeNode is one node's handle on the shared fake configuration.
type fakeNode struct {
	f  *fakeRaft
	id string
}

var _ Voters = (*fakeNode)(nil)

func (n *fakeNode) IsLeader() bool {
	n.f.mu.Lock()
	defer n.f.mu.Unlock()
	return n.f.leader == n.id && !n.f.dead[n.id]
}

func (n *fakeNode) Members() []kv.Member {
	n.f.mu.Lock()
	defer n.f.mu.Unlock()
	out := make([]kv.Member, 0, len(n.f.members))
	for _, m := range n.f.members {
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (n *fakeNode) AddLearner(ctx context.Context, id, raftAddr string) error {
	f := n.f
	return f.change(ctx, n.id, "add-learner "+id, func() error {
		if _, ok := f.members[id]; ok {
			return fmt.Errorf("fake raft: %s is already a member", id)
		}
		return nil
	}, func() {
		f.members[id] = &kv.Member{ID: id, RaftAddr: raftAddr}
	})
}

func (n *fakeNode) Promote(ctx context.Context, id string) error {
	f := n.f
	return f.change(ctx, n.id, "promote "+id, func() error {
		m, ok := f.members[id]
		if !ok || m.Voter {
			f.violations = append(f.violations, "promote of non-learner "+id)
			return fmt.Errorf("fake raft: %s is not a learner", id)
		}
		if m.Match == 0 || m.Match+16 < f.commit {
			f.violations = append(f.violations, fmt.Sprintf("promote of %s before it caught up (match %d, commit %d)", id, m.Match, f.commit))
		}
		return nil
	}, func() {
		f.members[id].Voter = true
	})
}

func (n *fakeNode) Remove(ctx context.Context, id string) error {
	f := n.f
	return f.change(ctx, n.id, "remove "+id, func() error {
		m, ok := f.members[id]
		if !ok {
			return fmt.Errorf("fake raft: %s is not a member", id)
		}
		if id == f.leader {
			f.violations = append(f.violations, "removal of the leader "+id)
			return errors.New("fake raft: refusing to remove the leader")
		}
		if m.Voter {
			// After removal the alive voters must still be a majority.
			voters, alive := 0, 0
			for mid, mm := range f.members {
				if mm.Voter && mid != id {
					voters++
					if !f.dead[mid] {
						alive++
					}
				}
			}
			if alive < voters/2+1 {
				f.violations = append(f.violations, fmt.Sprintf("removal of %s would leave %d alive of %d voters", id, alive, voters))
			}
		}
		return nil
	}, func() {
		delete(f.members, id)
	})
}
