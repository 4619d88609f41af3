package pipelinetest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/pipeline"
)

// FakeLog is an in-memory replicated log with manual commit: proposals wait
// in a queue until CommitNext applies them (dedup by ID, the Checker, then
// the revision preconditions) and tells the Observer.
type FakeLog struct {
	mu        sync.Mutex
	state     map[string]kv.Record
	firstApp  map[string]kv.Result
	pending   []*fakeProposal
	committed [][]kv.Command
	index     uint64
	noLeader  bool
	term      uint64
	lagging   map[string]bool

	Checker  kv.Checker
	Observer kv.ApplyObserver
}

var _ pipeline.Log = (*FakeLog)(nil)

type fakeProposal struct {
	batch []kv.Command
	done  chan struct{}
	res   []kv.Result
	lost  bool
}

func (p *fakeProposal) Wait(ctx context.Context) ([]kv.Result, error) {
	select {
	case <-p.done:
		if p.lost {
			return nil, fmt.Errorf("fakelog: %w", kv.ErrDropped)
		}
		return p.res, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("fakelog: %w", kv.ErrUnknown)
	}
}

// NewFakeLog returns an empty log with a leader.
func NewFakeLog() *FakeLog {
	return &FakeLog{state: map[string]kv.Record{}, firstApp: map[string]kv.Result{}, term: 1}
}

// NewTerm simulates a leader change: the term advances and a leader is
// known again.
func (l *FakeLog) NewTerm() {
	l.mu.Lock()
	l.term++
	l.noLeader = false
	l.mu.Unlock()
}

// Forget silently drops every pending batch, as when a follower's forwarded
// proposal dies with the old leader: it is never appended and its Wait
// never returns a result (only its context ends it).
func (l *FakeLog) Forget() int {
	l.mu.Lock()
	n := len(l.pending)
	l.pending = nil
	l.mu.Unlock()
	return n
}

// SetLeader toggles whether a leader is known (no leader: Propose fails
// with kv.ErrNoLeader).
func (l *FakeLog) SetLeader(ok bool) {
	l.mu.Lock()
	l.noLeader = !ok
	l.mu.Unlock()
}

// Propose queues the batch.
func (l *FakeLog) Propose(ctx context.Context, batch []kv.Command) (kv.Proposal, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.noLeader {
		return nil, fmt.Errorf("fakelog: %w", kv.ErrNoLeader)
	}
	p := &fakeProposal{batch: append([]kv.Command(nil), batch...), done: make(chan struct{})}
	l.pending = append(l.pending, p)
	return p, nil
}

// Pending is the number of proposed, uncommitted batches.
func (l *FakeLog) Pending() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.pending)
}

// CommitNext commits and applies the oldest pending batch; false if none.
func (l *FakeLog) CommitNext() bool {
	l.mu.Lock()
	if len(l.pending) == 0 {
		l.mu.Unlock()
		return false
	}
	p := l.pending[0]
	l.pending = l.pending[1:]
	l.index++
	idx := l.index
	l.committed = append(l.committed, p.batch)
	res := l.applyLocked(idx, p.batch)
	obs := l.Observer
	l.mu.Unlock()
	p.res = res
	close(p.done)
	if obs != nil {
		obs.Applied(idx, p.batch, res)
	}
	return true
}

// CommitSilently commits and applies the oldest pending batch without
// telling the Observer or answering its Wait, as a node that installs a
// snapshot covering the entry does; false if none.
func (l *FakeLog) CommitSilently() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.pending) == 0 {
		return false
	}
	p := l.pending[0]
	l.pending = l.pending[1:]
	l.index++
	l.committed = append(l.committed, p.batch)
	l.applyLocked(l.index, p.batch)
	return true
}

// Lose drops every pending batch: they were never appended (a leader lost
// its uncommitted tail).
func (l *FakeLog) Lose() int {
	l.mu.Lock()
	ps := l.pending
	l.pending = nil
	l.mu.Unlock()
	for _, p := range ps {
		p.lost = true
		close(p.done)
	}
	return len(ps)
}

// Replay applies the committed batch at index again, as a restart without
// snapshot would, and returns the results (W9).
func (l *FakeLog) Replay(index uint64) []kv.Result {
	l.mu.Lock()
	if index == 0 || index > uint64(len(l.committed)) {
		l.mu.Unlock()
		return nil
	}
	batch := l.committed[index-1]
	res := l.applyLocked(index, batch)
	obs := l.Observer
	l.mu.Unlock()
	if obs != nil {
		obs.Applied(index, batch, res)
	}
	return res
}

type fakeReader struct{ l *FakeLog }

func (r fakeReader) Get(key string) (kv.Record, bool) {
	rec, ok := r.l.state[key]
	return rec, ok
}

func (l *FakeLog) applyLocked(idx uint64, batch []kv.Command) []kv.Result {
	res := make([]kv.Result, len(batch))
	for i := range batch {
		cmd := &batch[i]
		r := kv.Result{Index: idx}
		if first, ok := l.firstApp[cmd.ID]; ok && cmd.ID != "" {
			r.Status, r.FirstIndex = kv.StatusDuplicate, first.Index
			res[i] = r
			continue
		}
		if l.Checker != nil {
			if err := l.Checker.Check(cmd, fakeReader{l}); err != nil {
				r.Status, r.Reason = kv.StatusRejected, err.Error()
				res[i] = r
				continue
			}
		}
		r.Status = kv.StatusApplied
		for _, w := range cmd.Effect.Writes {
			if w.Unconditional {
				continue
			}
			if cur := l.state[w.Key].Rev; cur != w.IfRev {
				r.Status, r.Reason = kv.StatusConflict, fmt.Sprintf("%s: revision %d, expected %d", w.Key, cur, w.IfRev)
				break
			}
		}
		if r.Status == kv.StatusApplied {
			for _, w := range cmd.Effect.Writes {
				if w.Delete {
					delete(l.state, w.Key)
					continue
				}
				l.state[w.Key] = kv.Record{Key: w.Key, Value: append([]byte(nil), w.Value...), Rev: idx}
			}
			if cmd.ID != "" {
				l.firstApp[cmd.ID] = r
			}
		}
		res[i] = r
	}
	return res
}

// Lag makes serializable reads of keys look absent, as on a node whose
// applied state is behind the log, until the next linearizable read (which
// waits for this node to catch up).
func (l *FakeLog) Lag(keys ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lagging == nil {
		l.lagging = map[string]bool{}
	}
	for _, k := range keys {
		l.lagging[k] = true
	}
}

// Get reads applied state.
func (l *FakeLog) Get(ctx context.Context, key string, linearizable bool) (kv.Record, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if linearizable {
		clear(l.lagging)
	} else if l.lagging[key] {
		return kv.Record{}, false, nil
	}
	r, ok := l.state[key]
	return r, ok, nil
}

// List reads applied state by prefix in key order.
func (l *FakeLog) List(ctx context.Context, prefix string, linearizable bool) ([]kv.Record, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []kv.Record
	for k, r := range l.state {
		if strings.HasPrefix(k, prefix) {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Outcome returns the first application of an ID.
func (l *FakeLog) Outcome(id string) (kv.Result, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.firstApp[id]
	return r, ok
}

// Status reports a single-node view.
func (l *FakeLog) Status() kv.LogStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := kv.LogStatus{NodeID: "n1", Term: l.term, Commit: l.index, Applied: l.index}
	if !l.noLeader {
		st.LeaderID, st.IsLeader = "n1", true
	}
	return st
}

// Index is the last applied index.
func (l *FakeLog) Index() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.index
}

// FakeClock is a manual clock.
type FakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

var _ pipeline.Clock = (*FakeClock)(nil)

// NewFakeClock starts at a fixed instant.
func NewFakeClock() *FakeClock {
	return &FakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// Now returns the fake time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After fires when Advance passes now+d.
func (c *FakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.waiters = append(c.waiters, fakeWaiter{at: c.now.Add(d), ch: ch})
	return ch
}

// Advance moves time forward and fires due timers.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	keep := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(c.now) {
			w.ch <- c.now
			continue
		}
		keep = append(keep, w)
	}
	c.waiters = keep
	c.mu.Unlock()
}

// FakeEvaluator is a scriptable handler: for every item it writes the
// payload to each handler-owned key the item touches, unless told to be
// down, to refuse a type, or to add transitions.
type FakeEvaluator struct {
	mu          sync.Mutex
	down        bool
	refuse      map[string]string
	transitions map[string][]pipeline.Transition
	Calls       int
	Batches     []int
}

var _ pipeline.Evaluator = (*FakeEvaluator)(nil)

// NewFakeEvaluator returns a healthy handler.
func NewFakeEvaluator() *FakeEvaluator {
	return &FakeEvaluator{refuse: map[string]string{}, transitions: map[string][]pipeline.Transition{}}
}

// SetDown makes every call fail (handler process down).
func (f *FakeEvaluator) SetDown(down bool) { f.mu.Lock(); f.down = down; f.mu.Unlock() }

// Refuse makes the handler refuse a type with a domain rule ("" clears).
func (f *FakeEvaluator) Refuse(typ, msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if msg == "" {
		delete(f.refuse, typ)
	} else {
		f.refuse[typ] = msg
	}
}

// AddTransition makes items of typ also request a transition.
func (f *FakeEvaluator) AddTransition(typ string, t pipeline.Transition) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.transitions[typ] = append(f.transitions[typ], t)
}

// Evaluate implements pipeline.Evaluator.
func (f *FakeEvaluator) Evaluate(ctx context.Context, items []pipeline.EvalItem) ([]pipeline.EvalResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls++
	f.Batches = append(f.Batches, len(items))
	if f.down {
		return nil, fmt.Errorf("fake handler: %w", &pipeline.EvalError{Kind: pipeline.EvalUnavailable, Msg: "handler process is down"})
	}
	out := make([]pipeline.EvalResult, len(items))
	for i, it := range items {
		if msg, ok := f.refuse[it.Type]; ok {
			out[i].Err = &pipeline.EvalError{Kind: pipeline.EvalRule, Msg: msg}
			continue
		}
		for _, r := range it.State {
			if strings.HasPrefix(r.Key, "_") {
				continue
			}
			out[i].Effect.Writes = append(out[i].Effect.Writes, kv.Write{Key: r.Key, Value: it.Payload, IfRev: r.Rev})
		}
		out[i].Result = []byte(`{"handled":"` + it.ID + `"}`)
		out[i].Transitions = append(out[i].Transitions, f.transitions[it.Type]...)
	}
	return out, nil
}
