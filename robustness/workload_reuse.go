package robustness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/conformance"
	"github.com/writ-dev/writ/kv"
)

// The workload's calls that replay an ID: a committed request's ID with
// another payload (an idempotency-key mismatch the node must refuse), a
// received fact reported again (a duplicate, applied once), and a fact
// with an order older than the instance's last (stale, never applied over
// a newer one).

// memoCap is how many of its recent IDs a client keeps for replays.
const memoCap = 8

// clientState is what one workload client remembers between calls.
type clientState struct {
	// retry is the request whose last answer decided nothing, retried
	// under retryID by the next call.
	retry   *conformance.Drawn
	retryID string
	// committed are requests answered COMMITTED, received the facts
	// answered RECEIVED: the newest memoCap of each.
	committed []memo
	received  []conformance.Drawn
	// delivered are the newest memoCap receipts answered RECEIVED.
	delivered []receiptMemo
}

type memo struct {
	d  conformance.Drawn
	id string
}

func (s *clientState) remember(d conformance.Drawn, id string) {
	s.committed = append(s.committed, memo{d: d, id: id})
	if len(s.committed) > memoCap {
		s.committed = s.committed[1:]
	}
}

func (s *clientState) received1(d conformance.Drawn) {
	s.received = append(s.received, d)
	if len(s.received) > memoCap {
		s.received = s.received[1:]
	}
}

// reuse submits a committed request's ID with another payload of the same
// instance, recorded as kind "reuse"; checkReuse wants it refused.
func (w *workload) reuse(ctx context.Context, client int, n *Node, rng *rand.Rand, st *clientState) string {
	if len(st.committed) == 0 {
		return ""
	}
	m := st.committed[rng.IntN(len(st.committed))]
	d, ok := w.draw(func(g *conformance.Generator) (conformance.Drawn, bool) { return g.Request(m.d.Instance) })
	if !ok || kv.PayloadDigest(d.Payload) == kv.PayloadDigest(m.d.Payload) {
		return "" // the same payload again would be a plain retry
	}
	return w.submitKind(ctx, client, n, d, m.id, "reuse")
}

// fact reports a fact: most often a new one with the instance's next
// order; sometimes one already received, again (a duplicate), or a new
// one with an order below the instance's last (stale).
func (w *workload) fact(ctx context.Context, client int, n *Node, rng *rand.Rand, st *clientState) string {
	inst := w.insts[rng.IntN(len(w.insts))]
	order := w.nextOrder(inst)
	switch k := rng.IntN(10); {
	case k == 0 && len(st.received) > 0:
		return w.report(ctx, client, n, st.received[rng.IntN(len(st.received))])
	case k == 1 && order > 4:
		order -= 2 + uint64(rng.IntN(3)) // 1–3 below the last one drawn
	}
	d, ok := w.newFact(inst, order)
	if !ok {
		return ""
	}
	out := w.report(ctx, client, n, d)
	if out == outReceived {
		st.received1(d)
	}
	return out
}

// nextOrder draws the instance's next per-instance order.
func (w *workload) nextOrder(inst string) uint64 {
	v, _ := w.orders.LoadOrStore(inst, new(atomic.Uint64))
	return v.(*atomic.Uint64).Add(1)
}

// newFact draws a fact about inst with a fresh ID and the given order.
func (w *workload) newFact(inst string, order uint64) (conformance.Drawn, bool) {
	fid := fmt.Sprintf("%s-f%d", w.run, w.seq.Add(1))
	return w.draw(func(g *conformance.Generator) (conformance.Drawn, bool) { return g.Fact(inst, fid, order) })
}

// checkReuse: a committed request's ID submitted again with another
// payload is never answered COMMITTED (W3's idempotency; the first
// payload's outcome and state are checks (a) and (d)). A refusal usually
// names the reuse; a node that has not applied the first payload yet can
// refuse the new one by its own guard before it is appended, which is as
// true.
func checkReuse(ops []Op) CheckResult {
	r := CheckResult{Name: "id-reuse-refused", Pass: true}
	for _, op := range ops {
		if op.Kind != "reuse" {
			continue
		}
		r.Cases++
		switch op.Outcome {
		case writv1.Outcome_COMMITTED.String():
			r.fail("%s reused with another payload on %s was answered COMMITTED at %d", op.ID, op.Node, op.Index)
		}
	}
	return r
}
