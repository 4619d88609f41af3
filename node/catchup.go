package node

import (
	"context"
	"sync"
	"time"

	"github.com/writ-dev/writ/api/writv1"
)

// Catch-up progress (docs/operator.md, "Catch-up").
//
// A node that is behind — restarted after missing entries, or a new
// learner receiving a snapshot — reports how far it is: its applied index
// against the leader's commit index, the share of the gap closed, the
// speed and an ETA. The node samples itself (asking the leader's API for
// its commit index) and, on the leader, every member's match index; the
// figures are in Status and Members, on the dashboard, in the
// writ_catchup_* metrics, and in a log line every catchUpLogEvery while a
// catch-up runs, then one when it is done.

const (
	// catchUpStart is how far behind a node must be for a catch-up to
	// start; catchUpDone how close it must come for it to end. A
	// follower under load is normally a few batches behind.
	catchUpStart = 1000
	catchUpDone  = 100
	// catchUpSample is how often the tracker samples.
	catchUpSample = 250 * time.Millisecond
	// catchUpLogEvery is how often a running catch-up is logged.
	catchUpLogEvery = 5 * time.Second
	// minCatchUpRate (entries/s) is the smoothed speed below which a
	// node that made no progress in a sample counts as stalled.
	minCatchUpRate = 1.0
)

// catchUp follows one node's progress towards a target index.
type catchUp struct {
	active     bool
	startT     time.Time
	startVal   uint64
	startGap   uint64
	val, tgt   uint64
	lastT      time.Time
	lastVal    uint64
	rate       float64 // entries/s, smoothed
	lastLogged time.Time
}

// sample records val against target at now; it reports whether a
// catch-up started or finished with this sample.
func (c *catchUp) sample(now time.Time, val, target uint64) (started, finished bool) {
	switch {
	case val < c.lastVal:
		// the index went back (a member removed and added again): start over
		*c = catchUp{}
	case !c.lastT.IsZero() && now.After(c.lastT):
		r := float64(val-c.lastVal) / now.Sub(c.lastT).Seconds()
		if c.rate == 0 {
			c.rate = r
		} else {
			c.rate = 0.5*c.rate + 0.5*r
		}
		if r == 0 && c.rate < minCatchUpRate {
			// a stalled node (stopped, cut off) has no speed and no ETA,
			// not a halving one that never reaches zero
			c.rate = 0
		}
	}
	c.lastT, c.lastVal = now, val
	c.val, c.tgt = val, target
	gap := uint64(0)
	if target > val {
		gap = target - val
	}
	switch {
	case !c.active && gap > catchUpStart:
		c.active, started = true, true
		c.startT, c.startVal, c.startGap = now, val, gap
		c.lastLogged = time.Time{}
	case c.active && gap <= catchUpDone:
		c.active, finished = false, true
	}
	return started, finished
}

// wire is the progress as the API reports it (nil when no catch-up ever
// ran and the node is not behind).
func (c *catchUp) wire() *writv1.CatchUp {
	if c.lastT.IsZero() {
		return nil
	}
	w := &writv1.CatchUp{Active: c.active, Applied: c.val, Target: c.tgt}
	if !c.startT.IsZero() {
		w.StartedUnixMs = c.startT.UnixMilli()
	}
	w.Percent = 100
	if c.active {
		// the target moves on while the node catches up: the share is
		// of the whole distance travelled and still to go
		done := float64(0)
		if c.val > c.startVal {
			done = float64(c.val - c.startVal)
		}
		left := float64(0)
		if c.tgt > c.val {
			left = float64(c.tgt - c.val)
		}
		if done+left > 0 {
			w.Percent = 100 * done / (done + left)
		} else {
			w.Percent = 0
		}
		w.EntriesPerSecond = c.rate
		if c.rate > 0 && left > 0 {
			w.EtaMs = uint64(left / c.rate * 1000)
		}
	}
	return w
}

// catchUps is the node's tracker: itself and, on the leader, its members.
type catchUps struct {
	mu      sync.Mutex
	self    catchUp
	members map[string]*catchUp
}

// runCatchUp samples every catchUpSample until the node stops.
func (n *Node) runCatchUp() {
	t := time.NewTicker(catchUpSample)
	defer t.Stop()
	for {
		select {
		case <-n.obs.stop:
			return
		case <-t.C:
			n.sampleCatchUp(time.Now())
		}
	}
}

func (n *Node) sampleCatchUp(now time.Time) {
	ls := n.rs.Status()
	log := n.log.With("component", "raft")
	cu := &n.catchUp
	if ls.IsLeader {
		members := n.rs.Members()
		cu.mu.Lock()
		cu.self = catchUp{}
		if cu.members == nil {
			cu.members = map[string]*catchUp{}
		}
		seen := map[string]bool{}
		for _, m := range members {
			if m.ID == n.cfg.NodeID {
				continue
			}
			seen[m.ID] = true
			c := cu.members[m.ID]
			if c == nil {
				c = &catchUp{}
				cu.members[m.ID] = c
			}
			started, finished := c.sample(now, m.Match, ls.Commit)
			n.logCatchUp(log.With("member", m.ID), c, now, started, finished, "raft: member catching up", "raft: member caught up")
		}
		for id := range cu.members {
			if !seen[id] {
				delete(cu.members, id)
			}
		}
		cu.mu.Unlock()
		return
	}
	cu.mu.Lock()
	cu.members = nil
	cu.mu.Unlock()
	if ls.LeaderID == "" {
		return
	}
	addr := (&info{n: n}).apiOf(ls.LeaderID)
	if addr == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	st, err := remoteStatus(ctx, addr, &writv1.StatusRequest{WithoutStateHash: true})
	cancel()
	if err != nil || !st.IsLeader {
		return
	}
	applied := n.rs.Status().Applied
	cu.mu.Lock()
	defer cu.mu.Unlock()
	started, finished := cu.self.sample(now, applied, st.Commit)
	n.logCatchUp(log, &cu.self, now, started, finished, "raft: catching up", "raft: caught up")
}

// logCatchUp writes the start, a line every catchUpLogEvery, and the end
// of a catch-up.
func (n *Node) logCatchUp(log interface {
	Info(string, ...any)
}, c *catchUp, now time.Time, started, finished bool, running, done string) {
	switch {
	case finished:
		log.Info(done, "applied", c.val, "target", c.tgt, "entries", c.val-c.startVal, "took", now.Sub(c.startT).Round(time.Millisecond).String())
	case c.active && (started || now.Sub(c.lastLogged) >= catchUpLogEvery):
		c.lastLogged = now
		w := c.wire()
		log.Info(running, "applied", c.val, "target", c.tgt, "behind", c.tgt-c.val, "percent", int(w.Percent),
			"entries_per_second", int(w.EntriesPerSecond), "eta", (time.Duration(w.EtaMs) * time.Millisecond).Round(time.Second).String())
	}
}

// catchUpSelf is this node's progress for Status (nil when none).
func (n *Node) catchUpSelf() *writv1.CatchUp {
	n.catchUp.mu.Lock()
	defer n.catchUp.mu.Unlock()
	return n.catchUp.self.wire()
}

// catchUpOf is the leader's view of member id (nil when none).
func (n *Node) catchUpOf(id string) *writv1.CatchUp {
	n.catchUp.mu.Lock()
	defer n.catchUp.mu.Unlock()
	if c := n.catchUp.members[id]; c != nil {
		return c.wire()
	}
	return nil
}
