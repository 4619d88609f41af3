package pipeline

import "time"

// Receipt items (W4). Nobody waits for the request items a receipt
// carries: their outcomes reach the scheduler only on the watch stream.
// Two rules follow from that.
//
// An item's commit timeout counts from its own proposal, not from the
// receipt's arrival. A receipt's items are proposed in batches bounded by
// MaxBatch and MaxBatchBytes, and items on the same keys one after another
// (key latches), so the last items of a large receipt can be proposed long
// after it arrived; a deadline set at arrival expired them while they were
// still queued, and they ended UNAVAILABLE without ever being proposed.
//
// An item that ends without a record in the log (UNAVAILABLE: not
// appended; UNCERTAIN: proposed, not confirmed in time) or that was
// already applied earlier (a redelivered receipt) has no apply to carry its
// outcome, so the outcome is put on this node's watch stream directly.

// armReceiptItemLocked starts a receipt item's commit timeout at its
// proposal (now).
func (p *Pipeline) armReceiptItemLocked(e *entry, now time.Time) {
	e.deadline = p.deadlineAt(now.Add(p.cfg.CommitTimeout))
}

// receiptItemEventLocked puts a receipt item's outcome that no apply
// carries on the watch ring. It takes the next position after the newest
// event (or the applied index), so the ring stays ordered by (Index, Pos):
// every command of an applied index is observed before the index is.
func (p *Pipeline) receiptItemEventLocked(e *entry, out Outcome) {
	if canaryReceiptDropped {
		return
	}
	r := &p.ring
	idx, pos := p.applied, 0
	if r.n > 0 {
		if last := r.at(r.n - 1); last.Index >= idx {
			idx, pos = last.Index, last.Pos+1
		}
	}
	ev := Event{Index: idx, Pos: pos, ID: e.cmdID, Type: e.typ, Class: e.class, Key: e.inst,
		Status: out.Status, Verdict: out.Verdict, Reason: out.Reason}
	if out.Duplicate {
		ev.Duplicate, ev.FirstIndex = true, out.Index
	}
	r.add(ev)
	r.wake()
}

// receiptItemAgainLocked handles a receipt item found already applied (its
// receipt was delivered again): its outcome is the one first recorded —
// a recorded rejection is applied too, so the log's outcome alone would
// say COMMITTED — marked as a duplicate, and it goes on the watch ring.
func (p *Pipeline) receiptItemAgainLocked(e *entry) {
	out := e.planOut
	if prev, ok := p.outcomes.get(e.cmdID); ok && prev.Index == out.Index {
		out.Status, out.Verdict, out.Reason = prev.Status, prev.Verdict, prev.Reason
	}
	p.receiptItemEventLocked(e, *out)
}
