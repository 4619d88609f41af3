package pipelinetest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/pipeline"
)

// FakeLog is an in-memory replicated log with manual commit: proposals wait
// in a queue until CommitNext applies them (dedup by ID, the Checker, then
// the revision preconditions) and tells the Observer.
type FakeLog struct {
	mu        sync.Mutex
	state     map[string]fakeValue
	firstApp  map[string]fakeOutcome // command ID → its application or fence
	pending   []*fakeProposal
	committed committedLog
	index     uint64
	noLeader  bool
	term      uint64
	lagging   map[string]bool

	Checker  kv.Checker
	Observer kv.ApplyObserver
	// WakeWaiterFirst makes CommitNext wake the batch's waiter before it
	// tells the Observer (the reverse of raftstore's order), so a test can
	// show the pipeline is correct on either order.
	WakeWaiterFirst bool
}

var (
	_ pipeline.Log         = (*FakeLog)(nil)
	_ pipeline.StateReader = (*FakeLog)(nil)
	_ pipeline.ReadBarrier = (*FakeLog)(nil)
)

// fakeOutcome is the recorded first application of a command ID, or its
// fence (raftstore's outcome table, for the definite outcomes).
type fakeOutcome struct {
	index   uint64
	digest  uint64
	verdict uint8
	fenced  bool
}

func (o fakeOutcome) result() kv.Result {
	if o.fenced {
		return kv.Result{Index: o.index, Status: kv.StatusFenced, FirstIndex: o.index}
	}
	return kv.Result{Index: o.index, Status: kv.StatusApplied, Digest: o.digest, Verdict: o.verdict}
}

// fakeValue is a key's applied value and revision.
type fakeValue struct {
	value []byte
	rev   uint64
}

func (v fakeValue) record(key string) kv.Record {
	return kv.Record{Key: key, Value: v.value, Rev: v.rev}
}

// committedLog keeps the newest committed batches (for Replay) in the
// log's encoding (kv.AppendBatch, as raftstore writes its entries). Like a
// raft log compacted after snapshots it is bounded: historyChunks buffers
// of up to historyChunk batches or historyChunkBytes each, reused as they
// rotate, so the history holds no pointers for the garbage collector to
// trace and a long run does not keep growing the heap.
type committedLog struct {
	n       uint64 // batches committed
	cur     int    // chunk being filled
	chunks  [historyChunks]historyBuf
	scratch []byte
}

const (
	historyChunks     = 16
	historyChunk      = 1024
	historyChunkBytes = 256 << 10
)

type historyBuf struct {
	first uint64 // index of the first batch in buf
	buf   []byte
	ends  []int // end offset of each batch in buf
}

func (c *committedLog) append(b []kv.Command) {
	c.scratch = kv.AppendBatch(c.scratch[:0], b)
	n := len(c.scratch)
	ch := &c.chunks[c.cur]
	if len(ch.ends) >= historyChunk || (len(ch.ends) > 0 && len(ch.buf)+n > cap(ch.buf)) {
		c.cur = (c.cur + 1) % historyChunks
		ch = &c.chunks[c.cur]
		ch.buf, ch.ends = ch.buf[:0], ch.ends[:0]
	}
	if cap(ch.buf) < n {
		ch.buf = make([]byte, 0, max(n, historyChunkBytes))
	}
	if len(ch.ends) == 0 {
		ch.first = c.n + 1
	}
	ch.buf = append(ch.buf, c.scratch...)
	ch.ends = append(ch.ends, len(ch.buf))
	c.n++
}

// at decodes the batch committed at index i (1-based); ok=false when i was
// never committed or is no longer retained.
func (c *committedLog) at(i uint64) (cmds []kv.Command, ok bool, err error) {
	for k := range c.chunks {
		ch := &c.chunks[k]
		if len(ch.ends) == 0 || i < ch.first || i >= ch.first+uint64(len(ch.ends)) {
			continue
		}
		r := i - ch.first
		start := 0
		if r > 0 {
			start = ch.ends[r-1]
		}
		cmds, err = kv.DecodeBatch(ch.buf[start:ch.ends[r]])
		if err != nil {
			return nil, false, fmt.Errorf("fakelog: committed batch %d: %w", i, err)
		}
		return cmds, true, nil
	}
	return nil, false, nil
}

// fakeProposal is one proposed batch; its fields are guarded by the log's
// mutex. The done channel is made only when someone waits before the
// batch is decided.
type fakeProposal struct {
	l       *FakeLog
	batch   []kv.Command
	done    chan struct{}
	decided bool
	res     []kv.Result
	lost    bool
	one     [1]kv.Command // holds the copy of a single-command batch
	oneRes  [1]kv.Result  // and its result
}

// popPendingLocked removes the oldest pending batch (the queue is short:
// shift it down rather than reslice, so appends reuse its array).
func (l *FakeLog) popPendingLocked() {
	n := copy(l.pending, l.pending[1:])
	l.pending[n] = nil
	l.pending = l.pending[:n]
}

func (p *fakeProposal) Wait(ctx context.Context) ([]kv.Result, error) {
	p.l.mu.Lock()
	if !p.decided && p.done == nil {
		p.done = make(chan struct{})
	}
	done := p.done
	p.l.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			return nil, fmt.Errorf("fakelog: %w", kv.ErrUnknown)
		}
	}
	p.l.mu.Lock()
	defer p.l.mu.Unlock()
	if p.lost {
		return nil, fmt.Errorf("fakelog: %w", kv.ErrDropped)
	}
	return p.res, nil
}

// decideLocked records the batch's fate and wakes its waiter.
func (p *fakeProposal) decideLocked(res []kv.Result, lost bool) {
	p.res, p.lost, p.decided = res, lost, true
	if p.done != nil {
		close(p.done)
	}
}

// NewFakeLog returns an empty log with a leader.
func NewFakeLog() *FakeLog {
	return &FakeLog{state: map[string]fakeValue{}, firstApp: map[string]fakeOutcome{}, term: 1}
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
	// the log keeps its own copy of the batch, as raftstore does by
	// encoding it
	p := &fakeProposal{l: l}
	if len(batch) == 1 {
		p.one[0] = batch[0]
		p.batch = p.one[:]
	} else {
		p.batch = append([]kv.Command(nil), batch...)
	}
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
// The Observer is told before the batch's Wait returns, in raftstore's
// order (WakeWaiterFirst reverses it).
func (l *FakeLog) CommitNext() bool {
	l.mu.Lock()
	if len(l.pending) == 0 {
		l.mu.Unlock()
		return false
	}
	p, idx, res := l.commitOldestLocked()
	obs := l.Observer
	if l.WakeWaiterFirst {
		p.decideLocked(res, false)
		l.mu.Unlock()
		if obs != nil {
			obs.Applied(idx, p.batch, res)
		}
		return true
	}
	l.mu.Unlock()
	// As raftstore does: the observer hears of the batch first, then its
	// waiter is woken.
	if obs != nil {
		obs.Applied(idx, p.batch, res)
	}
	l.mu.Lock()
	p.decideLocked(res, false)
	l.mu.Unlock()
	return true
}

// commitOldestLocked takes the oldest pending batch off the queue, commits
// it at the next index and applies it.
func (l *FakeLog) commitOldestLocked() (*fakeProposal, uint64, []kv.Result) {
	p := l.pending[0]
	l.popPendingLocked()
	l.index++
	l.committed.append(p.batch)
	return p, l.index, l.applyLocked(l.index, p.batch, p.oneRes[:0])
}

// Delay moves the oldest pending batch behind every other pending batch,
// as a proposal that reaches the leader late (re-forwarded after a leader
// change) is appended behind later ones; false if fewer than two are
// pending.
func (l *FakeLog) Delay() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.pending) < 2 {
		return false
	}
	p := l.pending[0]
	l.popPendingLocked()
	l.pending = append(l.pending, p)
	return true
}

// CommitSilently commits and applies the oldest pending batch as a node
// that installs a snapshot covering it does (raftstore after a restore):
// the Observer is not told of the entry itself but hears Restored(index) if
// it is a kv.RestoreObserver, and the batch's Wait is answered only when
// every command applied (a rejection or conflict may belong to an earlier
// attempt with the same ID, so such a waiter keeps waiting); false if none.
func (l *FakeLog) CommitSilently() bool {
	l.mu.Lock()
	if len(l.pending) == 0 {
		l.mu.Unlock()
		return false
	}
	p, idx, res := l.commitOldestLocked()
	ro, _ := l.Observer.(kv.RestoreObserver)
	l.mu.Unlock()
	if ro != nil {
		ro.Restored(idx)
	}
	for _, r := range res {
		if r.Status != kv.StatusApplied {
			return true
		}
	}
	l.mu.Lock()
	p.decideLocked(res, false)
	l.mu.Unlock()
	return true
}

// Lose drops every pending batch: they were never appended (a leader lost
// its uncommitted tail).
func (l *FakeLog) Lose() int {
	l.mu.Lock()
	ps := l.pending
	l.pending = nil
	for _, p := range ps {
		p.decideLocked(nil, true)
	}
	l.mu.Unlock()
	return len(ps)
}

// Replay applies the committed batch at index again, as a restart without
// snapshot would, and returns the results (W9); nil if the index was never
// committed or is older than the retained history.
func (l *FakeLog) Replay(index uint64) []kv.Result {
	l.mu.Lock()
	batch, ok, err := l.committed.at(index)
	if err != nil {
		l.mu.Unlock()
		panic(err) // the log's own encoding: cannot fail
	}
	if !ok {
		l.mu.Unlock()
		return nil
	}
	res := l.applyLocked(index, batch, nil)
	obs := l.Observer
	l.mu.Unlock()
	if obs != nil {
		obs.Applied(index, batch, res)
	}
	return res
}

type fakeReader struct{ l *FakeLog }

func (r fakeReader) Get(key string) (kv.Record, bool) {
	v, ok := r.l.state[key]
	if !ok {
		return kv.Record{}, false
	}
	return v.record(key), true
}

// applyLocked applies a committed batch; the results go to dst when it has
// room.
func (l *FakeLog) applyLocked(idx uint64, batch []kv.Command, dst []kv.Result) []kv.Result {
	var res []kv.Result
	if cap(dst) >= len(batch) {
		res = dst[:len(batch)]
		clear(res)
	} else {
		res = make([]kv.Result, len(batch))
	}
	var values []byte
	for i := range batch {
		cmd := &batch[i]
		r := kv.Result{Index: idx}
		if first, ok := l.firstApp[cmd.ID]; ok && cmd.ID != "" {
			if first.fenced {
				r.Status, r.FirstIndex, r.Reason = kv.StatusFenced, first.index, fmt.Sprintf("not committed: command ID %q was fenced at index %d", cmd.ID, first.index)
			} else {
				r.Status, r.FirstIndex, r.Digest, r.Verdict = kv.StatusDuplicate, first.index, first.digest, first.verdict
			}
			res[i] = r
			continue
		}
		if cmd.Type == kv.TypeFence && cmd.ID != "" {
			l.firstApp[cmd.ID] = fakeOutcome{index: idx, fenced: true}
			r.Status, r.FirstIndex, r.Reason = kv.StatusFenced, idx, fmt.Sprintf("not committed: command ID %q was fenced at index %d", cmd.ID, idx)
			res[i] = r
			continue
		}
		r.Digest, r.Verdict = kv.PayloadDigest(cmd.Payload), cmd.Verdict
		if l.Checker != nil {
			if err := l.Checker.Check(cmd, fakeReader{l}); err != nil {
				r.Status, r.Reason = kv.StatusRejected, err.Error()
				if errors.Is(err, kv.ErrMoved) { // as raftstore: a conflict
					r.Status = kv.StatusConflict
				}
				res[i] = r
				continue
			}
		}
		r.Status = kv.StatusApplied
		for _, w := range cmd.Effect.Writes {
			if w.Unconditional {
				continue
			}
			if cur := l.state[w.Key].rev; cur != w.IfRev {
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
				if len(w.Value) == 0 {
					l.state[w.Key] = fakeValue{rev: idx}
					continue
				}
				if values == nil {
					// applied state keeps its own copy of every value, as the
					// real log's state does; one buffer per batch
					n := 0
					for j := range batch[i:] {
						for _, w := range batch[i+j].Effect.Writes {
							n += len(w.Value)
						}
					}
					values = make([]byte, 0, n)
				}
				start := len(values)
				values = append(values, w.Value...)
				l.state[w.Key] = fakeValue{value: values[start:len(values):len(values)], rev: idx}
			}
			if cmd.ID != "" {
				l.firstApp[cmd.ID] = fakeOutcome{index: idx, digest: r.Digest, verdict: r.Verdict}
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
	v, ok := l.state[key]
	if !ok {
		return kv.Record{}, false, nil
	}
	return v.record(key), true, nil
}

// GetMany reads several keys of applied state under one lock (the
// pipeline's StateReader).
func (l *FakeLog) GetMany(ctx context.Context, keys []string, dst []kv.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, k := range keys {
		v, ok := l.state[k]
		if !ok || l.lagging[k] {
			dst[i] = kv.Record{Key: k}
			continue
		}
		dst[i] = v.record(k)
	}
	return nil
}

// List reads applied state by prefix in key order.
func (l *FakeLog) List(ctx context.Context, prefix string, linearizable bool) ([]kv.Record, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []kv.Record
	for k, v := range l.state {
		if strings.HasPrefix(k, prefix) {
			out = append(out, v.record(k))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// ReadBarrier stands for a confirmed read index: lagging keys catch up, as
// with a linearizable Get.
func (l *FakeLog) ReadBarrier(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.lagging)
	return nil
}

// Outcome returns the first application of an ID, or its fence.
func (l *FakeLog) Outcome(id string) (kv.Result, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	o, ok := l.firstApp[id]
	if !ok {
		return kv.Result{}, false
	}
	return o.result(), true
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
