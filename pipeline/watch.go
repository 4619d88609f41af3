package pipeline

import (
	"context"
	"math"
	"sort"

	"github.com/writ-dev/writ/schema/ir"
)

// Event is one committed outcome on the watch stream. Several commands can
// share a log index (a batch); (Index, Pos) orders them.
type Event struct {
	Index      uint64
	Pos        int
	ID         string // command ID: "req:<id>", "fact:<type>:<id>", "cfg:<id>:<phase>"
	Type       string
	Class      ir.Class
	Key        string // machine instance the entry addresses
	Status     Status // COMMITTED, or REJECTED (recorded rejection or apply-time veto)
	Verdict    Verdict
	Duplicate  bool
	FirstIndex uint64
	Reason     string
}

// Filter selects events; empty fields match everything.
type Filter struct {
	Types []string
	Key   string
}

func (f Filter) match(ev *Event) bool {
	if f.Key != "" && ev.Key != f.Key {
		return false
	}
	if len(f.Types) == 0 {
		return true
	}
	for _, t := range f.Types {
		if t == ev.Type {
			return true
		}
	}
	return false
}

// watchRing is a bounded ring of events, guarded by Pipeline.mu. The
// buffer grows by doubling up to cap, then the oldest event is overwritten.
type watchRing struct {
	cap  int
	buf  []Event
	head int // position of the oldest event in buf
	n    int // events retained
	// first is the lowest index still fully retained.
	first  uint64
	notify chan struct{}
	// taken: a watcher waits on notify, so wake must replace it.
	taken bool
}

// at is the i-th oldest retained event.
func (r *watchRing) at(i int) *Event {
	j := r.head + i
	if j >= len(r.buf) {
		j -= len(r.buf)
	}
	return &r.buf[j]
}

func (r *watchRing) add(ev Event) {
	if r.n < r.cap {
		if r.n == len(r.buf) {
			grown := make([]Event, min(max(2*len(r.buf), 64), r.cap))
			for i := 0; i < r.n; i++ {
				grown[i] = *r.at(i)
			}
			r.buf, r.head = grown, 0
		}
		*r.at(r.n) = ev
		r.n++
		return
	}
	old := &r.buf[r.head]
	r.first = old.Index + 1
	*old = ev
	if r.head++; r.head == len(r.buf) {
		r.head = 0
	}
}

func (r *watchRing) wake() {
	if !r.taken {
		return
	}
	close(r.notify)
	r.notify = make(chan struct{})
	r.taken = false
}

// Watcher reads the watch stream from a position.
type Watcher struct {
	p      *Pipeline
	index  uint64
	pos    int
	filter Filter
	// hist: events read from the log (fillFromLog), served before the ring
	hist []Event
}

// Watch returns a watcher positioned at the first event with Index >= from
// (from = 0: the oldest retained event).
// To resume after a reconnect, pass the last seen Index and skip events up
// to the last seen (Index, Pos), or use WatchAfter.
func (p *Pipeline) Watch(from uint64, f Filter) *Watcher {
	return &Watcher{p: p, index: from, filter: f}
}

// WatchAfter resumes strictly after the event (index, pos).
func (p *Pipeline) WatchAfter(index uint64, pos int, f Filter) *Watcher {
	return &Watcher{p: p, index: index, pos: pos + 1, filter: f}
}

// Poll returns the next matching event without blocking (ok=false when none
// is available yet), or a *CompactedError (errors.Is ErrCompacted) when the
// position is older than both the ring and the log retain. Events before
// the ring are read from the log (HistoryReader).
func (w *Watcher) Poll() (Event, bool, error) {
	for {
		w.p.mu.Lock()
		ev, ok, _, err := w.nextLocked()
		first, log := w.p.ring.first, w.p.log
		w.p.mu.Unlock()
		if err != errBehind {
			return ev, ok, err
		}
		if err := w.fillFromLog(first, log); err != nil {
			return Event{}, false, err
		}
	}
}

func (w *Watcher) nextLocked() (Event, bool, chan struct{}, error) {
	if len(w.hist) > 0 {
		ev := w.hist[0]
		if w.hist = w.hist[1:]; len(w.hist) == 0 {
			w.hist = nil
		}
		return ev, true, nil, nil
	}
	r := &w.p.ring
	if w.index != 0 && w.index < r.first {
		return Event{}, false, nil, errBehind
	}
	i := sort.Search(r.n, func(i int) bool {
		e := r.at(i)
		return e.Index > w.index || (e.Index == w.index && e.Pos >= w.pos)
	})
	for ; i < r.n; i++ {
		e := *r.at(i)
		w.index, w.pos = e.Index, e.Pos+1
		if w.filter.match(&e) {
			return e, true, nil, nil
		}
	}
	r.taken = true
	return Event{}, false, r.notify, nil
}

// Next blocks until the next matching event, ctx ends, or the position is
// compacted.
func (w *Watcher) Next(ctx context.Context) (Event, error) {
	for {
		w.p.mu.Lock()
		ev, ok, ch, err := w.nextLocked()
		stopped, first, log := w.p.stopped, w.p.ring.first, w.p.log
		w.p.mu.Unlock()
		if err == errBehind {
			if err := w.fillFromLog(first, log); err != nil {
				return Event{}, err
			}
			continue
		}
		if err != nil {
			return Event{}, err
		}
		if ok {
			return ev, nil
		}
		if stopped {
			return Event{}, ErrStopped
		}
		select {
		case <-ctx.Done():
			return Event{}, ctx.Err()
		case <-ch:
		}
	}
}

// outcomeCache retains recent outcomes by command ID (FIFO eviction). The
// outcomes live in a ring; the map holds only their positions, so it stays
// small and its slots cheap to move.
type outcomeCache struct {
	cap  int
	m    map[string]int32
	ring []cachedOutcome // circular once full: ring[next] is the oldest
	next int
}

type cachedOutcome struct {
	id string
	o  Outcome
}

func newOutcomeCache(n int) *outcomeCache {
	return &outcomeCache{cap: min(n, math.MaxInt32), m: make(map[string]int32)}
}

func (c *outcomeCache) put(id string, o Outcome) {
	if i, ok := c.m[id]; ok {
		c.ring[i].o = o
		return
	}
	if len(c.ring) < c.cap {
		c.m[id] = int32(len(c.ring))
		c.ring = append(c.ring, cachedOutcome{id: id, o: o})
		return
	}
	slot := &c.ring[c.next]
	delete(c.m, slot.id)
	*slot = cachedOutcome{id: id, o: o}
	c.m[id] = int32(c.next)
	if c.next++; c.next == len(c.ring) {
		c.next = 0
	}
}

func (c *outcomeCache) get(id string) (Outcome, bool) {
	i, ok := c.m[id]
	if !ok {
		return Outcome{}, false
	}
	return c.ring[i].o, true
}
