package robustness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/conformance"
	"github.com/writ-dev/writ/pipeline"
)

// Receipts (W4): the workload delivers receipts drawn from the catalog,
// their items addressing the run's instances, sometimes at the maximum
// number of items the schema allows, and sometimes a received receipt
// again (its items are then duplicates of the first delivery's). A
// receipt's acknowledgement confirms receipt only; what the suite can
// hold it to after heal is checkReceipts.

// Item is one item of a delivered receipt: its command ID as the
// acknowledgement named it, its type and the machine key it addresses.
type Item struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	Key  string `json:"key,omitempty"`
}

// receiptMemo is a received receipt a client may deliver again.
type receiptMemo struct {
	d     conformance.Drawn
	items []conformance.Drawn
}

// deliverCall delivers a new receipt about one of the run's instances, or
// (one time in four) a receipt this client had received, again.
func (w *workload) deliverCall(ctx context.Context, client int, n *Node, rng *rand.Rand, st *clientState) string {
	if len(st.delivered) > 0 && rng.IntN(4) == 0 {
		m := st.delivered[rng.IntN(len(st.delivered))]
		return w.deliver(ctx, client, n, m.d, m.items)
	}
	inst := w.insts[rng.IntN(len(w.insts))]
	rid := fmt.Sprintf("%s-r%d", w.run, w.seq.Add(1))
	var items []conformance.Drawn
	d, ok := w.draw(func(g *conformance.Generator) (conformance.Drawn, bool) {
		d, its, ok := g.Receipt(inst, rid)
		items = its
		return d, ok
	})
	if !ok {
		return ""
	}
	out := w.deliver(ctx, client, n, d, items)
	if out == outReceived {
		st.delivered = append(st.delivered, receiptMemo{d: d, items: items})
		if len(st.delivered) > memoCap {
			st.delivered = st.delivered[1:]
		}
	}
	return out
}

// deliver delivers d, recorded as kind "deliver" with the items the
// acknowledgement named.
func (w *workload) deliver(ctx context.Context, client int, n *Node, d conformance.Drawn, items []conformance.Drawn) string {
	op := Op{Client: client, Node: n.Name, Kind: "deliver", Type: d.Type, ID: d.ID, Payload: string(d.Payload)}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	op.Start = w.h.now()
	r, err := n.client.Deliver(cctx, &writv1.DeliverRequest{Entry: &writv1.Entry{Type: d.Type, Payload: d.Payload}})
	op.End = w.h.now()
	cancel()
	switch {
	case err == nil && r.Received:
		op.Outcome = outReceived
		if len(r.ItemIds) != len(items) {
			op.Reason = fmt.Sprintf("acknowledged %d item IDs for %d items", len(r.ItemIds), len(items))
		}
		for i, id := range r.ItemIds {
			it := Item{ID: id}
			if i < len(items) {
				it.Type = items[i].Type
				if items[i].Machine != "" {
					it.Key = pipeline.MachineKey(items[i].Machine, items[i].Instance)
				}
			}
			op.Items = append(op.Items, it)
		}
	case err == nil:
		op.Outcome, op.Reason = outError, "answered without received"
	default:
		op.answerErr(err)
	}
	w.h.add(op)
	return op.Outcome
}

// receiptStats counts a run's receipt items by how they ended.
type receiptStats struct {
	Items     int `json:"items"`
	Committed int `json:"committed"`
	Rejected  int `json:"rejected"`
	Unknown   int `json:"unknown"` // never reached the log
}

// receiptItem is one item across the run's deliveries.
type receiptItem struct {
	Item
	first int64 // the first delivery's start
	of    string
	// delivered is how many times its receipt was received: an item that
	// ended unavailable may commit when the receipt is delivered again.
	delivered int
}

// receiptItems lists the items of every received delivery, once each, in
// the order first delivered, and the deliveries whose acknowledgement
// did not name one ID per item.
func receiptItems(ops []Op) (items []receiptItem, bad []string) {
	seen := map[string]int{} // item ID → its index in items
	for _, op := range ops {
		if op.Kind != "deliver" || op.Outcome != outReceived {
			continue
		}
		if op.Reason != "" {
			bad = append(bad, fmt.Sprintf("%s (%s) on %s: %s", op.ID, op.Type, op.Node, op.Reason))
		}
		for _, it := range op.Items {
			if i, ok := seen[it.ID]; ok {
				items[i].delivered++
				continue
			}
			seen[it.ID] = len(items)
			items = append(items, receiptItem{Item: it, first: op.Start, of: op.ID, delivered: 1})
		}
	}
	return items, bad
}

// settleItems asks every node for every item's outcome until the answers
// stop changing: after heal, a node may still be proposing the items of a
// large receipt it received (items on one key go one after another), so
// one look could see an item applied on one node and not yet on another.
// Each node answers from its own applied table (serializable); the items
// not yet in the log on every node at one index are asked again every
// pause until two looks agree.
// It polls every pause, for at most d, and returns the last answers.
func settleItems(ctx context.Context, cl *Cluster, ids []string, pause, d time.Duration) map[string][]nodeOutcome {
	res := outcomesOf(ctx, cl, ids, true)
	deadline := time.Now().Add(d)
	// An item every node has at one index stays so: only the others (not
	// in the log anywhere, or not yet everywhere) are asked again.
	open := func() []string {
		var out []string
		for _, id := range ids {
			if os := res[id]; !agree(os) || !os[0].known {
				out = append(out, id)
			}
		}
		return out
	}
	last := ""
	for ids := open(); len(ids) > 0 && ctx.Err() == nil; ids = open() {
		var b strings.Builder
		for _, id := range ids {
			b.WriteString(id + " " + describe(res[id]) + "\n")
		}
		if b.String() == last || time.Now().After(deadline) {
			break
		}
		last = b.String()
		sleepCtx(ctx, pause)
		for id, os := range outcomesOf(ctx, cl, ids, true) {
			res[id] = os
		}
	}
	return res
}

// checkReceipts (W4, W3): every item of a received receipt ends with one
// answer on every node after heal — committed at one index, a recorded
// rejection at one index, or unknown everywhere (a request item that
// never reached the log: a receipt confirms nothing) — and a fact item is
// committed on every node (a fact is kept from its acknowledgement on).
// It returns the committed items as commands, for the linearizability and
// guard checks, written within [first delivery, known].
func checkReceipts(items []receiptItem, bad []string, res map[string][]nodeOutcome, known int64) (CheckResult, []resolved, receiptStats) {
	var st receiptStats
	r := CheckResult{Name: "receipt-items", Pass: true}
	for _, b := range bad {
		r.fail("receipt %s", b)
	}
	var cmds []resolved
	for _, it := range items {
		r.Cases++
		st.Items++
		os := res[it.ID]
		if !agree(os) {
			r.fail("item %s of receipt %s (%s): nodes disagree: %s", it.ID, it.of, it.Type, describe(os))
			continue
		}
		if strings.HasPrefix(it.ID, "fact:") {
			if _, ok := sameEverywhere(os); !ok {
				r.fail("fact item %s of receipt %s received but: %s", it.ID, it.of, describe(os))
			}
		}
		switch ci, ok := committedIndex(os); {
		case ok:
			st.Committed++
			cmds = append(cmds, resolved{id: it.ID, index: ci, call: it.first, ret: known, key: it.Key, typ: it.Type, desc: it.Type + " " + it.ID})
		case os[0].known:
			st.Rejected++
		default:
			st.Unknown++
		}
	}
	return r, cmds, st
}

// agree reports whether every node answered, and all alike: unknown
// everywhere, or the same outcome at the same index.
func agree(os []nodeOutcome) bool {
	for _, o := range os {
		if o.err != nil {
			return false
		}
		f := os[0]
		if o.known != f.known || (o.known && (o.out != f.out || o.index != f.index)) {
			return false
		}
	}
	return true
}

// redelivered are the items whose receipt was received more than once.
func redelivered(items []receiptItem) map[string]bool {
	m := map[string]bool{}
	for _, it := range items {
		if it.delivered > 1 {
			m[it.ID] = true
		}
	}
	return m
}

// itemIDs are the items' command IDs, sorted.
func itemIDs(items []receiptItem) []string {
	ids := make([]string, 0, len(items))
	for _, it := range items {
		ids = append(ids, it.ID)
	}
	sort.Strings(ids)
	return ids
}
