package robustness

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/conformance"
	"github.com/writ-dev/writ/pipeline"
)

// The workload's less common calls, all drawn from the catalog: facts
// delivered out of order, twice, or with an order already passed;
// requests whose ID is reused with another payload; receipts with items;
// config upgrades.

// nextOrder allocates n consecutive orders of inst and returns the first.
func (w *workload) nextOrder(inst string, n uint64) uint64 {
	v, _ := w.orders.LoadOrStore(inst, new(atomic.Uint64))
	return v.(*atomic.Uint64).Add(n) - n + 1
}

func (w *workload) drawFact(inst string, order uint64) (conformance.Drawn, bool) {
	fid := fmt.Sprintf("%s-f%d", w.run, w.seq.Add(1))
	return w.draw(func(g *conformance.Generator) (conformance.Drawn, bool) { return g.Fact(inst, fid, order) })
}

// factReordered reports two facts of one instance, the newer order first,
// a moment apart: the older one must then be stale.
func (w *workload) factReordered(ctx context.Context, id int, n *Node, rng *rand.Rand) {
	inst := w.insts[rng.IntN(len(w.insts))]
	o := w.nextOrder(inst, 2)
	newer, ok1 := w.drawFact(inst, o+1)
	older, ok2 := w.drawFact(inst, o)
	if !ok1 || !ok2 {
		return
	}
	w.report(ctx, id, n, newer, o+1)
	sleepCtx(ctx, time.Duration(rng.IntN(150))*time.Millisecond)
	w.report(ctx, id, w.cl.nodes[rng.IntN(len(w.cl.nodes))], older, o)
}

// factAgain reports the client's last fact again (same ID and payload: a
// duplicate), or a new fact with an order already used (stale).
func (w *workload) factAgain(ctx context.Context, id int, n *Node, rng *rand.Rand, last *conformance.Drawn, lastOrder uint64) {
	if last == nil {
		return
	}
	if rng.IntN(2) == 0 {
		w.report(ctx, id, n, *last, lastOrder)
		return
	}
	if d, ok := w.drawFact(last.Instance, max(1, lastOrder)); ok {
		w.report(ctx, id, n, d, max(1, lastOrder))
	}
}

// reuse sends another payload under an ID already answered COMMITTED.
func (w *workload) reuse(ctx context.Context, id int, n *Node, rng *rand.Rand) {
	w.mu.Lock()
	if len(w.done) == 0 {
		w.mu.Unlock()
		return
	}
	prev := w.done[rng.IntN(len(w.done))]
	w.mu.Unlock()
	d, ok := w.draw(func(g *conformance.Generator) (conformance.Drawn, bool) { return g.Request(prev.inst) })
	if !ok || d.Machine != prev.machine {
		return
	}
	w.submitOp(ctx, id, n, d, prev.id, true)
}

// deliver sends a receipt; each item it acknowledges is recorded as an
// item call under its command ID (its outcome is looked up after heal like
// a request's).
func (w *workload) deliver(ctx context.Context, client int, n *Node) {
	d, ok := w.draw(func(g *conformance.Generator) (conformance.Drawn, bool) { return g.Receipt(w.insts) })
	if !ok {
		return
	}
	// A receipt ID of its own: its items' command IDs derive from it.
	if td, ok := w.cat.Type(d.Type); ok && td.Entry.ID != "" {
		var obj map[string]json.RawMessage
		if json.Unmarshal(d.Payload, &obj) == nil {
			d.ID = fmt.Sprintf("%s-r%d", w.run, w.seq.Add(1))
			obj[td.Entry.ID], _ = json.Marshal(d.ID)
			d.Payload, _ = json.Marshal(obj)
		}
	}
	op := Op{Client: client, Node: n.Name, Kind: "deliver", Type: d.Type, ID: d.ID, Payload: string(d.Payload)}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	op.Start = w.h.now()
	r, err := n.client.Deliver(cctx, &writv1.DeliverRequest{Entry: &writv1.Entry{Type: d.Type, Payload: d.Payload}})
	op.End = w.h.now()
	cancel()
	switch {
	case err == nil && r.Received:
		op.Outcome = outReceived
	case err == nil:
		op.Outcome, op.Reason = outError, "answered without received"
	default:
		if od, ok := api.OutcomeFromError(err); ok {
			op.Outcome, op.Reason = od.Outcome.String(), od.Reason
		} else {
			op.Outcome, op.Reason = outError, err.Error()
		}
	}
	w.h.add(op)
	if op.Outcome != outReceived {
		return
	}
	items := w.receiptItems(d)
	for i, cid := range r.ItemIds {
		it := Op{Client: client, Node: n.Name, Kind: "item", ID: cid, Start: op.Start, End: op.End, Outcome: "ITEM"}
		if i < len(items) && len(items) == len(r.ItemIds) {
			it.Type, it.Key, it.Payload = items[i].typ, items[i].key, items[i].payload
		}
		w.h.add(it)
	}
}

type itemCall struct{ typ, key, payload string }

// receiptItems decodes a receipt's items with the catalog: each item's type,
// machine key and payload.
func (w *workload) receiptItems(d conformance.Drawn) []itemCall {
	td, ok := w.cat.Type(d.Type)
	if !ok {
		return nil
	}
	p, err := td.ParseJSON(d.Payload)
	if err != nil {
		return nil
	}
	var raw map[string]json.RawMessage
	_ = json.Unmarshal(d.Payload, &raw)
	var elems []json.RawMessage
	if td.Entry.ItemsField != "" {
		_ = json.Unmarshal(raw[td.Entry.ItemsField], &elems)
	}
	var out []itemCall
	for i, ip := range p.Items() {
		it := itemCall{typ: ip.EntryType()}
		if itd, ok := w.cat.Type(it.typ); ok && itd.Machine != nil {
			it.key = pipeline.MachineKey(itd.Machine.Name, ip.InstanceKey())
		}
		if i < len(elems) {
			it.payload = string(elems[i])
		}
		out = append(out, it)
	}
	return out
}

// config sends a config upgrade drawn from the catalog and records its
// progress (phases, the activation's acknowledgement count) and answer.
func (w *workload) config(ctx context.Context, client int, n *Node) {
	d, ok := w.draw(func(g *conformance.Generator) (conformance.Drawn, bool) { return g.Config() })
	if !ok {
		return
	}
	op := Op{Client: client, Node: n.Name, Kind: "config", Type: d.Type, ID: w.newID(client), Payload: string(d.Payload)}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*w.timeout+5*time.Second)
	defer cancel()
	op.Start = w.h.now()
	st, err := n.client.ConfigUpgrade(cctx, &writv1.ConfigUpgradeRequest{RequestId: op.ID, Document: d.Payload, Format: "json", Type: d.Type,
		TimeoutMs: uint32(w.timeout.Milliseconds())})
	var last *writv1.ConfigProgress
	for err == nil {
		var p *writv1.ConfigProgress
		p, err = st.Recv()
		if err != nil {
			break
		}
		last = p
		op.Phases = append(op.Phases, p.Phase.String())
		if p.Phase == writv1.ConfigProgress_ACTIVATED {
			op.CommittedBy, op.Of = p.CommittedBy, p.Of
		}
		if p.Tag != "" {
			op.Tag = p.Tag
		}
	}
	op.End = w.h.now()
	switch {
	case last != nil && last.Outcome != writv1.Outcome_OUTCOME_UNSPECIFIED && (err == nil || strings.Contains(err.Error(), "EOF")):
		op.Outcome, op.Index, op.Reason = last.Outcome.String(), last.Index, last.Message
	case err != nil && !strings.Contains(err.Error(), "EOF"):
		if od, ok := api.OutcomeFromError(err); ok {
			op.Outcome, op.Index, op.Reason = od.Outcome.String(), od.Index, od.Reason
		} else {
			op.Outcome, op.Reason = outError, err.Error()
		}
	case last != nil:
		op.Outcome, op.Index, op.Reason = last.Outcome.String(), last.Index, last.Message
	default:
		op.Outcome, op.Reason = outError, "no progress"
	}
	w.h.add(op)
}
