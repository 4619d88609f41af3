package robustness

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/writ-dev/writ/client"
)

// The run's watcher: one client.Watch over every node's endpoint, from
// the first index, for the whole run. It resumes by itself when its node
// is killed, stopped or cut off; checkWatch then wants every committed ID
// delivered once, at the index it committed at, in log order.

// watchEvent is one delivered event.
type watchEvent struct {
	index  uint64
	id     string // command ID: "req:<id>", "fact:<type>:<id>", ...
	status string
}

// watchGap is a range of indexes the watcher was told are compacted and
// so never delivered: it re-listed nothing and watched on from to.
type watchGap struct{ from, to uint64 }

// watchLog records what the run's watcher delivered.
type watchLog struct {
	cancel context.CancelFunc
	done   chan struct{}
	c      *client.Client

	once sync.Once

	mu      sync.Mutex
	evs     []watchEvent
	gaps    []watchGap
	resumes int // reopened by the client after a broken stream
	reopens int // reopened by the suite after Recv gave up
	errs    []string
}

// startWatch opens the watcher on every node's endpoint; it runs until
// stop.
func startWatch(ctx context.Context, cl *Cluster) (*watchLog, error) {
	eps := make([]string, 0, len(cl.nodes))
	for _, n := range cl.nodes {
		eps = append(eps, n.API)
	}
	// A kill-all or a partition of the watcher's node can keep every
	// endpoint away for longer than a client's usual request timeout.
	c, err := client.New(client.Config{Endpoints: eps, RequestTimeout: 90 * time.Second, DialTimeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("robustness: watch client: %w", err)
	}
	wctx, cancel := context.WithCancel(ctx)
	wl := &watchLog{cancel: cancel, done: make(chan struct{}), c: c}
	go wl.run(wctx)
	return wl, nil
}

func (wl *watchLog) run(ctx context.Context) {
	defer close(wl.done)
	from := uint64(1)
	var atLast map[string]bool // IDs delivered at the last index
	var last uint64
	for ctx.Err() == nil {
		w, err := wl.c.Watch(ctx, client.WatchOptions{FromIndex: from})
		if err != nil {
			wl.note("open at %d: %v", from, err)
			sleepCtx(ctx, 500*time.Millisecond)
			continue
		}
		for {
			ev, err := w.Recv()
			if err != nil {
				wl.mu.Lock()
				wl.resumes += w.Resumes()
				wl.mu.Unlock()
				w.Close()
				if ctx.Err() != nil {
					return
				}
				if n, ok := compactedFrom(err); ok {
					wl.mu.Lock()
					wl.gaps = append(wl.gaps, watchGap{from: last + 1, to: n - 1})
					wl.mu.Unlock()
					from, last, atLast = n, n-1, nil
				} else {
					// Reopen after the last delivered event, skipping what
					// was delivered at its index.
					wl.note("recv after %d: %v", last, err)
					from = max(last, 1)
				}
				wl.mu.Lock()
				wl.reopens++
				wl.mu.Unlock()
				break
			}
			if ev.Index == last && atLast[ev.ID] {
				continue // a reopen at the last index: delivered already
			}
			if ev.Index != last {
				last, atLast = ev.Index, map[string]bool{}
			}
			atLast[ev.ID] = true
			wl.mu.Lock()
			wl.evs = append(wl.evs, watchEvent{index: ev.Index, id: ev.ID, status: ev.Status})
			wl.mu.Unlock()
		}
	}
}

func (wl *watchLog) note(format string, args ...any) {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	if len(wl.errs) < 8 {
		wl.errs = append(wl.errs, fmt.Sprintf(format, args...))
	}
}

// compactedFrom is the index a "compacted" refusal says to watch from.
func compactedFrom(err error) (uint64, bool) {
	const mark = "watch from index "
	s := err.Error()
	i := strings.LastIndex(s, mark)
	if i < 0 || !strings.Contains(s, "compacted") {
		return 0, false
	}
	digits := s[i+len(mark):]
	if j := strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }); j >= 0 {
		digits = digits[:j]
	}
	n, perr := strconv.ParseUint(digits, 10, 64)
	return n, perr == nil && n > 0
}

// lastIndex is the index of the newest delivered event.
func (wl *watchLog) lastIndex() uint64 {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	if len(wl.evs) == 0 {
		return 0
	}
	return wl.evs[len(wl.evs)-1].index
}

// stop waits, up to d, for the watcher to deliver index want, then stops
// it.
func (wl *watchLog) stop(ctx context.Context, want uint64, d time.Duration) {
	_ = poll(ctx, d, func() (bool, string) { return wl.lastIndex() >= want, "" })
	wl.close()
}

// close stops the watcher (again: nothing).
func (wl *watchLog) close() {
	wl.once.Do(func() {
		wl.cancel()
		<-wl.done
		wl.c.Close()
	})
}

// watchStats is what a run's watcher did, for run.json and the summary.
type watchStats struct {
	Events  int `json:"events"`
	Resumes int `json:"resumes"`
	Reopens int `json:"reopens,omitempty"`
	Gaps    int `json:"gaps,omitempty"`
}

func (wl *watchLog) stats() watchStats {
	wl.mu.Lock()
	defer wl.mu.Unlock()
	return watchStats{Events: len(wl.evs), Resumes: wl.resumes, Reopens: wl.reopens, Gaps: len(wl.gaps)}
}

// checkWatch: the watch delivered its events in log order, none twice;
// every ID committed (by the nodes' Outcome after heal) is delivered at
// the index it committed at, unless that index lies in a range the node
// said was compacted; and no event applies an ID at another index.
func checkWatch(wl *watchLog, committed map[string]uint64, again map[string]bool) CheckResult {
	r := CheckResult{Name: "watch-complete", Pass: true}
	wl.mu.Lock()
	defer wl.mu.Unlock()
	for _, e := range wl.errs {
		if len(r.Detail) < 2 {
			r.Detail = append(r.Detail, "note: "+e)
		}
	}
	type at struct {
		index uint64
		id    string
	}
	seen := map[at]bool{}
	byID := map[string][]watchEvent{}
	var prev uint64
	for _, ev := range wl.evs {
		if ev.index < prev {
			r.fail("event %s at %d delivered after index %d", ev.id, ev.index, prev)
		}
		prev = ev.index
		k := at{ev.index, ev.id}
		if seen[k] {
			r.fail("event %s at %d delivered twice", ev.id, ev.index)
		}
		seen[k] = true
		byID[ev.id] = append(byID[ev.id], ev)
	}
	inGap := func(i uint64) bool {
		for _, g := range wl.gaps {
			if i >= g.from && i <= g.to {
				return true
			}
		}
		return false
	}
	ids := make([]string, 0, len(committed))
	for id := range committed {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		ci := committed[id]
		if inGap(ci) {
			continue
		}
		r.Cases++
		eid := eventID(id)
		if ci > prev {
			r.fail("%s committed at %d, but the watch stopped at %d", id, ci, prev)
			continue
		}
		if !seen[at{ci, eid}] {
			r.fail("%s committed at %d, but the watch delivered no event for it there (its events: %s)", id, ci, describeEvents(byID[eid]))
		}
		for _, ev := range byID[eid] {
			switch {
			case ev.index == ci, ev.status == "duplicate", ev.status == "rejected":
			case ev.index < ci && ev.status == "uncertain":
				// A receipt item told uncertain, committed later.
			case (ev.status == "unavailable" || ev.status == "uncertain") && again[eid]:
				// Its receipt came more than once: one delivery's attempt
				// was not appended (before the one that committed it, or
				// after, when the node could not read its state to see it
				// was applied).
			default:
				r.fail("%s committed at %d, but the watch has it %s at %d too", id, ci, ev.status, ev.index)
			}
		}
	}
	return r
}

// eventID is the watch's command ID of an Outcome ID.
func eventID(id string) string {
	if strings.HasPrefix(id, "fact:") || strings.HasPrefix(id, "req:") {
		return id
	}
	return "req:" + id
}

func describeEvents(evs []watchEvent) string {
	if len(evs) == 0 {
		return "none"
	}
	var b []string
	for _, ev := range evs {
		b = append(b, fmt.Sprintf("%s@%d", ev.status, ev.index))
	}
	return strings.Join(b, ", ")
}
