package robustness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/writ-dev/writ/api/writv1"
)

// A watcher follows the committed log through Watch from index 1, from the
// start of the run to after heal, on one node at a time: when its stream
// breaks (the node was killed, stopped or cut off) it resumes from the last
// index it saw, on the next node. Resuming re-sends the events of that
// index, which are dropped by (index, id). A watcher whose resume is
// refused (compacted) records the hole; the guards check (e) replays the
// log from a watcher without one.

// watchEvent is one event a watcher received.
type watchEvent struct {
	Index  uint64 `json:"index"`
	ID     string `json:"id"`
	Type   string `json:"type"`
	Key    string `json:"key"`
	Status string `json:"status"`
	Node   string `json:"node"`
}

type watcher struct {
	id   int
	cl   *Cluster
	home int

	mu      sync.Mutex
	events  []watchEvent
	seen    map[string]bool // index/id
	last    uint64
	holes   []string // refused resumes: the coverage is not complete
	resumes int
}

func newWatcher(id int, cl *Cluster, home int) *watcher {
	return &watcher{id: id, cl: cl, home: home, seen: map[string]bool{}}
}

// run follows the log until ctx ends. A node that refuses the position
// (compacted: a restarted node holds only the entries after its newest
// snapshot) is passed over; when every node refuses it, the hole is
// recorded and the watcher stops.
func (w *watcher) run(ctx context.Context) {
	node, refused := w.home, 0
	for ctx.Err() == nil {
		n := w.cl.nodes[node%len(w.cl.nodes)]
		err := w.follow(ctx, n)
		if ctx.Err() != nil {
			return
		}
		w.mu.Lock()
		w.resumes++
		if err != nil && strings.Contains(err.Error(), "compacted") {
			refused++
			if refused >= len(w.cl.nodes) {
				w.holes = append(w.holes, fmt.Sprintf("every node refused index %d: %v", w.last, err))
				w.mu.Unlock()
				return
			}
		} else {
			refused = 0
		}
		w.mu.Unlock()
		node++
		sleepCtx(ctx, 50*time.Millisecond)
	}
}

func (w *watcher) follow(ctx context.Context, n *Node) error {
	w.mu.Lock()
	from := max(w.last, 1)
	w.mu.Unlock()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := n.client.Watch(sctx, &writv1.WatchRequest{FromIndex: from})
	if err != nil {
		return err
	}
	// A stream to a stopped or cut-off node sends nothing: give up on it
	// when nothing arrives for a while and the node is not the only one.
	idle := time.AfterFunc(3*time.Second, cancel)
	defer idle.Stop()
	for {
		ev, err := st.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		idle.Reset(3 * time.Second)
		k := fmt.Sprintf("%d/%s", ev.Index, ev.Id)
		w.mu.Lock()
		if ev.Index < w.last {
			w.mu.Unlock()
			return fmt.Errorf("robustness: %s sent index %d after %d", n.Name, ev.Index, w.last)
		}
		if !w.seen[k] {
			w.seen[k] = true
			w.events = append(w.events, watchEvent{Index: ev.Index, ID: ev.Id, Type: ev.Type, Key: ev.Key, Status: ev.Status, Node: n.Name})
		}
		w.last = ev.Index
		w.mu.Unlock()
	}
}

// snapshot is a copy of the events received so far.
func (w *watcher) snapshot() []watchEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]watchEvent(nil), w.events...)
}

// caughtUp reports whether the watcher has seen index idx or later, or
// has stopped at a hole.
func (w *watcher) caughtUp(idx uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last >= idx || len(w.holes) > 0
}

// logEvent reports whether an event comes from the log (every node sends
// it at the same index) rather than from one node's ring (a receipt item
// that ended without a log record).
func logEvent(e watchEvent) bool { return e.Status != "unavailable" && e.Status != "uncertain" }

// checkWatches: every watcher received the log's events in index order and
// any two watchers agree on what each index holds (ID, type and status);
// every command committed per Outcome at an index a complete watcher
// passed is on its stream. It returns the complete watcher with the most
// events (nil if none) for the guard replay.
func checkWatches(ws []*watcher, committed map[string]uint64) (CheckResult, *watcher) {
	r := CheckResult{Name: "watch-agrees", Pass: true}
	type at struct{ typ, status string }
	byIdx := map[string]at{}
	var best *watcher
	for _, w := range ws {
		w.mu.Lock()
		evs := append([]watchEvent(nil), w.events...)
		holes := append([]string(nil), w.holes...)
		last := w.last
		w.mu.Unlock()
		r.Cases++
		if !sort.SliceIsSorted(evs, func(i, j int) bool { return evs[i].Index < evs[j].Index }) {
			r.fail("watcher %d: events out of index order", w.id)
		}
		ids := map[string]bool{}
		for _, e := range evs {
			if !logEvent(e) {
				continue
			}
			ids[e.ID] = true
			k := fmt.Sprintf("%d/%s", e.Index, e.ID)
			if prev, ok := byIdx[k]; ok && prev != (at{e.Type, e.Status}) {
				r.fail("index %d %s: one watcher saw %s %s, watcher %d saw %s %s (from %s)", e.Index, e.ID, prev.typ, prev.status, w.id, e.Type, e.Status, e.Node)
			}
			byIdx[k] = at{e.Type, e.Status}
		}
		if len(holes) > 0 {
			continue
		}
		for id, idx := range committed {
			if idx <= last && !ids[id] {
				r.fail("watcher %d passed index %d without %s, committed there", w.id, idx, id)
			}
		}
		r.Cases += len(committed)
		if best == nil || len(evs) > len(best.events) {
			best = w
		}
	}
	return r, best
}
