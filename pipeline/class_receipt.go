package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/writ-dev/writ/schema/ir"
)

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

// Deliver accepts a receipt (W4): the Ack confirms receipt only. Each item
// goes through its own class — facts into the outbox before the Ack,
// requests queued — and per-item outcomes appear on the watch stream, never
// in the Ack.
func (p *Pipeline) Deliver(ctx context.Context, en Entry) Ack {
	ps, bad := p.validate(en)
	if bad != nil {
		p.traceReject(en, bad)
		return Ack{ID: en.ID, Status: bad.Status, Reason: bad.Reason, Field: bad.Field, Rule: bad.Rule}
	}
	if ps.class != ir.ClassReceipt {
		o := reject(en.Type, "type", "class receipt", fmt.Sprintf("type is class %s: use %s", ps.class, verbFor(ps.class)))
		return Ack{ID: ps.id, Status: o.Status, Reason: o.Reason, Field: o.Field, Rule: o.Rule}
	}
	items := ps.payload.Items()
	var facts, reqs []validated
	ack := Ack{Received: true, ID: ps.id}
	for i, it := range items {
		d, ok := p.cat.Type(it.EntryType())
		if !ok {
			o := reject(en.Type, fmt.Sprintf("items[%d]", i), "declared", fmt.Sprintf("item type %q is not declared", it.EntryType()))
			return Ack{ID: ps.id, Status: o.Status, Reason: o.Reason, Field: o.Field, Rule: o.Rule}
		}
		ips := validated{desc: d, class: d.Class, payload: it}
		if !d.Class.Valid() {
			if p.strict {
				panic(fmt.Sprintf("pipeline: W6 violated: receipt item type %q is unclassified", d.Name))
			}
			p.lg.Error("pipeline: unclassified receipt item type; handling it as a fact (W6)", "type", d.Name)
			ips.class = ir.ClassFact
		}
		if err := it.Validate(); err != nil {
			var fe *ir.FieldError
			field := fmt.Sprintf("items[%d]", i)
			rule := "valid"
			if errors.As(err, &fe) {
				field += "." + fe.Field
				rule = fe.Rule
			}
			return Ack{ID: ps.id, Status: StatusRejected, Reason: err.Error(), Field: field, Rule: rule}
		}
		js, err := json.Marshal(it)
		if err != nil {
			return Ack{ID: ps.id, Status: StatusRejected, Reason: "item does not encode: " + err.Error(), Field: fmt.Sprintf("items[%d]", i), Rule: "json"}
		}
		ips.json = js
		ips.id = it.IdempotencyKey()
		if ips.id == "" {
			ips.id = ps.id + "/" + strconv.Itoa(i)
		}
		switch ips.class {
		case ir.ClassFact:
			if o := p.factReused(ips); o != nil {
				return Ack{ID: ps.id, Status: o.Status, Reason: fmt.Sprintf("items[%d]: %s", i, o.Reason), Field: fmt.Sprintf("items[%d].%s", i, o.Field), Rule: o.Rule}
			}
			facts = append(facts, ips)
			ack.ItemIDs = append(ack.ItemIDs, factCmdID(d.Name, ips.id))
		case ir.ClassRequest:
			reqs = append(reqs, ips)
			ack.ItemIDs = append(ack.ItemIDs, requestCmdID(ips.id))
		default:
			return Ack{ID: ps.id, Status: StatusRejected, Field: fmt.Sprintf("items[%d]", i), Rule: "class request|fact",
				Reason: fmt.Sprintf("receipt item type %q is class %s; items must be requests or facts", d.Name, ips.class)}
		}
	}
	if len(facts) > 0 {
		if err := p.acceptFacts(facts); err != nil {
			return notReceived(ps.id, err)
		}
	}
	for _, r := range reqs {
		p.startRequest(context.Background(), r, true, false)
	}
	p.mu.Lock()
	p.trace0("receipt", ps.id, ps.desc.Name, fmt.Sprintf("received %d items", len(items)))
	p.mu.Unlock()
	if canaryReceiptAckShort && len(ack.ItemIDs) > 1 {
		ack.ItemIDs = ack.ItemIDs[:len(ack.ItemIDs)-1] // canary build: one item unnamed
	}
	return ack
}
