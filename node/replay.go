package node

import (
	"context"
	"runtime"
	"time"

	"github.com/writ-dev/writ/pipeline"
)

// replayBatch is how many history events a watcher sends on one replay
// slot before it lets another watcher replay.
const replayBatch = 64

// replaySlots lets a few Watch streams at a time replay retained history;
// a watcher that has caught up waits for new events without a slot. Many
// watchers catching up at once would otherwise take the CPU the write
// path needs.
type replaySlots chan struct{}

func newReplaySlots() replaySlots {
	return make(replaySlots, max(1, runtime.GOMAXPROCS(0)/4))
}

// replayer is one Watch stream's use of the replay slots.
type replayer struct {
	slots replaySlots
	// rate is the most history events per second one slot sends (0: no
	// pacing).
	rate  int
	held  bool
	sent  int
	since time.Time
}

// next is the watcher's next event: from history under a replay slot, or,
// once caught up, the next new event without one.
func (r *replayer) next(ctx context.Context, wt *pipeline.Watcher) (pipeline.Event, error) {
	ev, ok, err := wt.Poll()
	if err != nil {
		return ev, err
	}
	if !ok {
		r.release()
		return wt.Next(ctx)
	}
	if r.held && r.sent >= replayBatch {
		r.pace(ctx)
		r.release()
	}
	if !r.held {
		select {
		case r.slots <- struct{}{}:
			r.held, r.sent, r.since = true, 0, time.Now()
		case <-ctx.Done():
			return pipeline.Event{}, ctx.Err()
		}
	}
	r.sent++
	return ev, nil
}

// pace holds the slot until the batch sent took as long as the rate
// allows, so replays leave the CPU to the write path.
func (r *replayer) pace(ctx context.Context) {
	if r.rate <= 0 {
		return
	}
	wait := time.Duration(r.sent)*time.Second/time.Duration(r.rate) - time.Since(r.since)
	if wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func (r *replayer) release() {
	if r.held {
		<-r.slots
		r.held = false
	}
}
