package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/writ-dev/writ/api/writv1"
)

// WatchOptions selects the committed outcomes a Watch streams.
type WatchOptions struct {
	// FromIndex is the first log index to stream (0: from the oldest the
	// node retains).
	FromIndex uint64
	// Types keeps only these entry types (empty: all).
	Types []string
	// Key keeps only this instance key (empty: all).
	Key string
}

// Event is one committed outcome on a watch.
type Event struct {
	Index  uint64
	Type   string
	Key    string
	ID     string
	Status string // applied, duplicate, conflict, rejected, stale, quarantined ...
	Reason string
	Class  string
	// Endpoint is the endpoint the event was read from.
	Endpoint string
}

// Watcher is a watch that resumes by itself: when the stream from one
// endpoint breaks, it reopens it (on the same or the next endpoint) from
// the last event it delivered, so no event is lost or repeated. Several
// events can share a log index; the watcher counts the ones it delivered at
// the last index and skips them after a resume.
type Watcher struct {
	c      *Client
	opts   WatchOptions
	ctx    context.Context
	cancel context.CancelFunc

	// read by Recv only (one goroutine at a time)
	stream  writv1.Writ_WatchClient
	addr    string
	index   uint64 // index of the last delivered event (0: none yet)
	atIndex int    // events delivered at index
	skip    int    // events at index still to skip after a resume

	resumes atomic.Int64
}

// Watch opens a watch. It fails only when no endpoint can open it within
// RequestTimeout; later failures of the stream are resumed by Recv.
func (c *Client) Watch(ctx context.Context, opts WatchOptions) (*Watcher, error) {
	wctx, cancel := context.WithCancel(ctx)
	w := &Watcher{c: c, opts: opts, ctx: wctx, cancel: cancel}
	if err := w.open(); err != nil {
		cancel()
		return nil, err
	}
	return w, nil
}

// Close ends the watch.
func (w *Watcher) Close() { w.cancel() }

// Resumes counts the times the watch was reopened after a broken stream.
func (w *Watcher) Resumes() int { return int(w.resumes.Load()) }

// open (re)opens the stream after the last delivered event.
func (w *Watcher) open() error {
	from := w.opts.FromIndex
	if w.index > 0 {
		from = w.index
		w.skip = w.atIndex
	}
	req := &writv1.WatchRequest{FromIndex: from, Types: w.opts.Types, Key: w.opts.Key}
	var last error
	end := time.Now().Add(w.c.cfg.RequestTimeout)
	tried := map[int]bool{}
	for round := 0; ; {
		i, conn, addr, err := w.c.pick(false, tried)
		if err != nil {
			return err
		}
		if i < 0 {
			tried = map[int]bool{}
			if !pause(w.ctx, end, min(50*time.Millisecond<<min(round, 4), 500*time.Millisecond)) {
				if last == nil {
					last = w.ctx.Err()
				}
				return fmt.Errorf("client: watch: no endpoint could open it: %w", last)
			}
			round++
			continue
		}
		tried[i] = true
		s, err := writv1.NewWritClient(conn).Watch(w.ctx, req)
		if err == nil {
			// the server sends nothing until an event: a stream that
			// opened is not yet proof the endpoint is up, Recv decides
			w.stream, w.addr = s, addr
			return nil
		}
		if !transportFailure(err) {
			return fmt.Errorf("client: watch on %s: %w", addr, err)
		}
		w.c.down(i)
		last = err
	}
}

// Recv returns the next event. It blocks until one is committed, the
// watch's context ends, or the stream fails in a way a resume cannot mend
// (such as a position the cluster no longer retains). Call it from one
// goroutine at a time.
func (w *Watcher) Recv() (Event, error) {
	for {
		ev, err := w.stream.Recv()
		if err == nil {
			if ev.Index == w.index && w.skip > 0 {
				w.skip--
				continue
			}
			w.skip = 0
			if ev.Index != w.index {
				w.index, w.atIndex = ev.Index, 0
			}
			w.atIndex++
			w.c.markUp(w.addr)
			return Event{Index: ev.Index, Type: ev.Type, Key: ev.Key, ID: ev.Id, Status: ev.Status, Reason: ev.Reason, Class: ev.Class, Endpoint: w.addr}, nil
		}
		if w.ctx.Err() != nil {
			return Event{}, w.ctx.Err()
		}
		if !errors.Is(err, io.EOF) && !transportFailure(err) {
			return Event{}, fmt.Errorf("client: watch on %s: %w", w.addr, err)
		}
		// the endpoint went away (or ended the stream as it shut down):
		// resume from the last delivered event
		w.c.markDown(w.addr)
		w.resumes.Add(1)
		if err := w.open(); err != nil {
			return Event{}, err
		}
	}
}
