package pipeline

import (
	"fmt"
)

// Handle is an in-flight request.
type Handle struct {
	e *entry
	p *Pipeline
}

// Done is closed when the outcome is known.
func (h *Handle) Done() <-chan struct{} {
	if h.e.answered.Load() {
		// e.done no longer changes once the entry is answered
		if d := h.e.done; d != nil {
			return d
		}
		return closedDone
	}
	h.p.mu.Lock()
	defer h.p.mu.Unlock()
	return h.e.doneLocked()
}

// closedDone is the Done channel of entries answered before anyone asked.
var closedDone = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// doneLocked is the entry's Done channel, made on first use: nobody waits
// on most receipt items or on requests answered before their caller looks.
func (e *entry) doneLocked() chan struct{} {
	if e.done == nil {
		if e.replied {
			return closedDone
		}
		e.done = make(chan struct{})
	}
	return e.done
}

// Outcome returns the outcome; valid after Done is closed.
func (h *Handle) Outcome() Outcome {
	h.p.mu.Lock()
	defer h.p.mu.Unlock()
	return h.e.out
}

func doneHandle(p *Pipeline, o Outcome) *Handle {
	e := &entry{out: o, finished: true, replied: true}
	e.answered.Store(true)
	return &Handle{e: e, p: p}
}

// finishLocked delivers the outcome to the requester (the reply stage).
func (p *Pipeline) finishLocked(e *entry, out Outcome) {
	if e.replied {
		return
	}
	if out.Status == StatusCommitted && out.Index > p.applied {
		if st := p.log.Status(); out.Index > st.Applied {
			panic(fmt.Sprintf("pipeline: W1 violated: reply for %s at index %d before local apply (applied %d)", e.cmdID, out.Index, p.applied))
		}
	}
	out.ID, out.Type = e.userID, e.typ
	if e.receiptItem && out.Status != StatusCommitted && out.Index == 0 {
		// Nobody waits for a receipt item and nothing was recorded in the
		// log: say so loudly, and put the outcome on the watch stream
		// (class_receipt.go), the only place the scheduler looks.
		p.lg.Warn("pipeline: receipt item not appended", "request_id", e.userID, "type", e.typ, "status", out.Status.String(), "reason", out.Reason)
		p.receiptItemEventLocked(e, out)
	}
	if out.Verdict == VerdictNone && out.Status == StatusCommitted {
		out.Verdict = e.verdict
	}
	e.replied = true
	e.out = out
	p.mfinished(e, out)
	if e.kind != kindConfig || out.Status != StatusUncertain {
		e.finished = true
		p.unlatchLocked(e)
		p.dropLiveLocked(e)
	}
	switch e.kind {
	case kindRequest:
		// A reuse of the ID with another payload is refused, but it is
		// not the ID's outcome: the first payload's answer stays cached.
		if out.Rule != reuseRule {
			p.outcomes.put(e.cmdID, out)
		}
	case kindConfig:
		p.outcomes.put(configCmdID(e.userID, "stage"), out)
	}
	if p.cfg.Trace != nil {
		p.trace("reply", e, out.Index, out.String())
	}
	if e.done != nil {
		close(e.done)
	}
	e.answered.Store(true)
	p.wakeup()
}

func (p *Pipeline) dropLiveLocked(e *entry) {
	if e.kind == kindConfig {
		for _, ph := range []string{"stage", "activate", "abort"} {
			if p.live[configCmdID(e.userID, ph)] == e {
				delete(p.live, configCmdID(e.userID, ph))
			}
		}
		return
	}
	if p.live[e.cmdID] == e {
		delete(p.live, e.cmdID)
	}
	if alt := e.altID(); alt != "" && p.live[alt] == e {
		delete(p.live, alt)
	}
}
