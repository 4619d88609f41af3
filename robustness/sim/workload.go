package sim

import (
	"fmt"
	"time"

	"github.com/writ-dev/writ/pipeline"
)

// client submits sim.put requests with IDs through a node's pipeline, one
// at a time: a new ID after a definite answer, the same ID again (same
// payload) after an answer that decided nothing (UNCERTAIN, UNAVAILABLE)
// or none at all (the node crashed), and now and then the same ID again
// after COMMITTED (it must name the same index). After heal it starts no
// new IDs but finishes the one it has.
type client struct {
	w   *World
	id  int
	seq int
	cur *request
	att *attempt
	// waiting: a next() is scheduled
	waiting bool
	done    bool
}

type request struct {
	id, key, value string
	acked          bool
	index          uint64
	retriedAcked   bool
	final          pipeline.Status // a definite answer other than COMMITTED
}

type attempt struct {
	n     *node
	life  int
	h     *pipeline.Handle
	start time.Duration
}

const keys = 4

func (c *client) next() {
	w := c.w
	c.waiting = false
	if c.cur == nil {
		if w.healed {
			c.done = true
			return
		}
		c.seq++
		c.cur = &request{id: fmt.Sprintf("c%d-%d", c.id, c.seq), key: fmt.Sprintf("%d", w.rng.Intn(keys))}
		c.cur.value = c.cur.id
		w.stats.Requests++
		w.checks.requests = append(w.checks.requests, c.cur)
	}
	var up []*node
	for _, n := range w.nodes {
		if n.up {
			up = append(up, n)
		}
	}
	if len(up) == 0 {
		c.later(20 * time.Millisecond)
		return
	}
	n := up[w.rng.Intn(len(up))]
	payload := fmt.Sprintf(`{"key":%q,"value":%q}`, c.cur.key, c.cur.value)
	w.stats.Attempts++
	c.att = &attempt{n: n, life: n.life, start: w.now,
		h: n.pl.SubmitAsync(bg, pipeline.Entry{Type: PutType, ID: c.cur.id, Payload: []byte(payload)})}
	w.traceEvent("submit", uint64(c.id)<<8|uint64(n.idx), uint64(c.seq))
}

func (c *client) later(d time.Duration) {
	if c.waiting {
		return
	}
	c.waiting = true
	c.w.after(d, c.next)
}

func (c *client) backoff() time.Duration {
	return 10*time.Millisecond + time.Duration(c.w.rng.Int63n(int64(50*time.Millisecond)))
}

// poll looks at the client's attempt: answered, lost with its node, or
// still waiting.
func (c *client) poll() {
	a := c.att
	if a == nil {
		return
	}
	w := c.w
	if a.n.life != a.life {
		// The node crashed: no answer. Retry the same ID elsewhere.
		c.att = nil
		w.stats.Outcomes["no answer"]++
		c.later(c.backoff())
		return
	}
	select {
	case <-a.h.Done():
	default:
		if w.now-a.start > 4*w.cfg.CommitTimeout+time.Second {
			c.att = nil
			w.stats.Outcomes["client timeout"]++
			c.later(c.backoff())
		}
		return
	}
	c.att = nil
	o := a.h.Outcome()
	r := c.cur
	w.stats.Outcomes[o.Status.String()]++
	w.traceEvent("answer:"+o.Status.String(), uint64(c.id), o.Index)
	switch o.Status {
	case pipeline.StatusCommitted:
		if r.acked && o.Index != r.index {
			w.violate("ack-stable", "request %s answered COMMITTED at %d, then at %d on %s", r.id, r.index, o.Index, a.n.name)
		}
		if r.final != 0 {
			w.violate("ack-stable", "request %s answered %s, then COMMITTED at %d", r.id, r.final, o.Index)
		}
		if !r.acked {
			w.stats.Acked++
		}
		r.acked, r.index = true, o.Index
		w.checks.acked(r, a.n)
		if !r.retriedAcked && w.rng.Intn(6) == 0 {
			r.retriedAcked = true
			c.later(c.backoff()) // the same ID once more
			return
		}
		c.cur = nil
		c.later(time.Duration(w.rng.Int63n(int64(30 * time.Millisecond))))
	case pipeline.StatusUncertain, pipeline.StatusUnavailable:
		c.later(c.backoff())
	default: // NOT_COMMITTED (fenced), REJECTED: definite, not applied
		if r.acked {
			w.violate("ack-stable", "request %s answered COMMITTED at %d, then %s: %s", r.id, r.index, o.Status, o.Reason)
		}
		r.final = o.Status
		c.cur = nil
		c.later(time.Duration(w.rng.Int63n(int64(30 * time.Millisecond))))
	}
}

func (w *World) pollClients() {
	for _, c := range w.clients {
		c.poll()
	}
}
