package robustness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/conformance"
	"github.com/writ-dev/writ/pipeline"
)

// target is one machine instance the workload addresses.
type target struct {
	machine, inst, key string
}

// workload runs concurrent clients against every node: requests (new IDs,
// and retries under the same ID after an answer that decided nothing),
// facts with IDs and per-instance orders, linearizable and serializable
// reads of the instances' keys. Payloads come from the schema's catalog.
type workload struct {
	cl      *Cluster
	h       *History
	timeout time.Duration
	run     string

	genMu   sync.Mutex
	gen     *conformance.Generator
	insts   []string
	targets []target

	orders sync.Map // instance → *atomic.Uint64
	seq    atomic.Uint64
}

func (w *workload) draw(f func(g *conformance.Generator) (conformance.Drawn, bool)) (conformance.Drawn, bool) {
	w.genMu.Lock()
	defer w.genMu.Unlock()
	return f(w.gen)
}

// setup creates every instance with every creating request type, through
// node 1, recorded as client 0's calls. The first two instances are created
// with the largest payloads the schema allows (in runes, then in bytes), so
// that every run carries them through apply, not only the runs whose draws
// happen to reach a maximum (the apply-overrun canary relies on it).
func (w *workload) setup(ctx context.Context) {
	seen := map[string]bool{}
	for i, inst := range w.insts {
		w.genMu.Lock()
		var cs []conformance.Drawn
		if i < 2 {
			cs = w.gen.LargestCreations(inst, i == 1)
		}
		if len(cs) == 0 {
			cs = w.gen.Creations(inst)
		}
		w.genMu.Unlock()
		for _, d := range cs {
			key := pipeline.MachineKey(d.Machine, inst)
			if !seen[key] {
				seen[key] = true
				w.targets = append(w.targets, target{machine: d.Machine, inst: inst, key: key})
			}
			w.submit(ctx, 0, w.cl.nodes[0], d, w.newID(0))
		}
	}
}

func (w *workload) newID(client int) string {
	return fmt.Sprintf("%s-c%d-%d", w.run, client, w.seq.Add(1))
}

// client runs until ctx ends, on its own rng, addressing node home mostly
// and any node sometimes.
func (w *workload) client(ctx context.Context, id int, home *Node, rng *rand.Rand) {
	st := &clientState{}
	for ctx.Err() == nil {
		n := home
		if rng.IntN(4) == 0 {
			n = w.cl.nodes[rng.IntN(len(w.cl.nodes))]
		}
		var out string
		if st.retry != nil {
			// The last answer decided nothing: retry under the same ID,
			// on another node.
			d, rid := *st.retry, st.retryID
			st.retry = nil
			out = w.submit(ctx, id, n, d, rid)
			if out == writv1.Outcome_COMMITTED.String() {
				st.remember(d, rid)
			}
		} else {
			out = w.call(ctx, id, n, rng, st)
		}
		if out == outError {
			// No answer (the node is down or cut off): back off a little,
			// as a client would, instead of spinning on a refused
			// connection (each such call is one more ID to settle).
			sleepCtx(ctx, time.Duration(20+rng.IntN(30))*time.Millisecond)
		}
	}
}

// call makes one drawn call and returns its outcome; a request whose
// answer decided nothing is left in st.retry half the time.
func (w *workload) call(ctx context.Context, id int, n *Node, rng *rand.Rand, st *clientState) string {
	switch k := rng.IntN(100); {
	case k < 37:
		inst := w.insts[rng.IntN(len(w.insts))]
		d, ok := w.draw(func(g *conformance.Generator) (conformance.Drawn, bool) { return g.Request(inst) })
		if !ok {
			return ""
		}
		rid := w.newID(id)
		out := w.submit(ctx, id, n, d, rid)
		switch {
		case out == writv1.Outcome_COMMITTED.String():
			st.remember(d, rid)
		case (out == writv1.Outcome_UNCERTAIN.String() || out == outError) && rng.IntN(2) == 0:
			st.retry, st.retryID = &d, rid
		}
		return out
	case k < 40:
		return w.reuse(ctx, id, n, rng, st)
	case k < 55:
		return w.fact(ctx, id, n, rng, st)
	case k < 56:
		return w.deliverCall(ctx, id, n, rng, st)
	case k < 92:
		return w.get(ctx, id, n, w.targets[rng.IntN(len(w.targets))].key, false)
	default:
		return w.get(ctx, id, n, w.targets[rng.IntN(len(w.targets))].key, true)
	}
}

func (w *workload) submit(ctx context.Context, client int, n *Node, d conformance.Drawn, id string) string {
	return w.submitKind(ctx, client, n, d, id, "submit")
}

// submitKind submits d under id, recorded as an op of kind.
func (w *workload) submitKind(ctx context.Context, client int, n *Node, d conformance.Drawn, id, kind string) string {
	op := Op{Client: client, Node: n.Name, Kind: kind, Type: d.Type, ID: id,
		Key: pipeline.MachineKey(d.Machine, d.Instance), Payload: string(d.Payload)}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.timeout+3*time.Second)
	op.Start = w.h.now()
	r, err := n.client.Submit(cctx, &writv1.SubmitRequest{Entry: &writv1.Entry{Type: d.Type, Id: id, Payload: d.Payload},
		TimeoutMs: uint32(w.timeout.Milliseconds())})
	op.End = w.h.now()
	cancel()
	switch {
	case err == nil:
		op.Outcome, op.Index, op.Reason = r.Outcome.String(), r.Index, r.Reason
	default:
		op.answerErr(err)
	}
	w.h.add(op)
	return op.Outcome
}

func (w *workload) report(ctx context.Context, client int, n *Node, d conformance.Drawn) string {
	op := Op{Client: client, Node: n.Name, Kind: "report", Type: d.Type, ID: d.ID,
		Key: pipeline.MachineKey(d.Machine, d.Instance), Payload: string(d.Payload)}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	op.Start = w.h.now()
	r, err := n.client.Report(cctx, &writv1.ReportRequest{Entry: &writv1.Entry{Type: d.Type, Payload: d.Payload}})
	op.End = w.h.now()
	cancel()
	switch {
	case err == nil && r.Received:
		op.Outcome = outReceived
	case err == nil:
		op.Outcome, op.Reason = outError, "answered without received"
	default:
		op.answerErr(err)
	}
	w.h.add(op)
	return op.Outcome
}

func (w *workload) get(ctx context.Context, client int, n *Node, key string, serializable bool) string {
	op := Op{Client: client, Node: n.Name, Kind: "get", Key: key}
	if serializable {
		op.Kind = "sget"
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	op.Start = w.h.now()
	r, err := n.client.Get(cctx, &writv1.GetRequest{Key: key, Serializable: serializable})
	op.End = w.h.now()
	cancel()
	if err != nil {
		op.Outcome, op.Reason = outError, err.Error()
	} else {
		op.Outcome, op.Found = outOK, r.Found
		if r.Found && r.Record != nil {
			op.Rev, op.Value = r.Record.Rev, string(r.Record.Value)
		}
	}
	w.h.add(op)
	return op.Outcome
}

// flood reports facts to n, one after another, until ctx ends (a fault
// that needs the node to write, such as disk-full, calls it); they are
// recorded as client id's calls and checked as any other.
func (w *workload) flood(ctx context.Context, id int, n *Node, rng *rand.Rand) {
	for ctx.Err() == nil {
		inst := w.insts[rng.IntN(len(w.insts))]
		d, ok := w.newFact(inst, w.nextOrder(inst))
		if !ok {
			return
		}
		if w.report(ctx, id, n, d) == outError {
			sleepCtx(ctx, 20*time.Millisecond)
		}
	}
}
