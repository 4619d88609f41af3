package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/schema/ir"
)

// factSequenceCases is how many perturbed fact sequences
// property.fact-sequences runs through the pipeline in a run of the given
// number of cases: each workload case chains its share on one instance.
func factSequenceCases(cases int) int { return max(100, cases/10) }

// chainFactSequences runs more fact sequences through both rigs of a
// workload case, on instance inst of ft's machine, each from the state the
// previous one left: A gets the ordered sequence, B a perturbed delivery
// (duplicates, re-sends, reorderings within an epoch, replays, late
// reports of an earlier epoch); both must end in the same state. When the
// machine has an entry type that opens order epochs, sequences open new
// epochs on the way (a request through the plugin, the same on both rigs).
// The chain ends when the instance cannot move any more, or the runs
// diverged (reported).
func (e *Env) chainFactSequences(ctx context.Context, a, b *rig, ft factTargets, inst string, d *drawer, rng *rand.Rand, k int) {
	// This case's share of what is left: later cases make up for chains
	// that ended early.
	left := max(1, pipelineCases(e.Opts.Cases)-k)
	per := (factSequenceCases(e.Opts.Cases) - e.wl.seq.out.Cases + left - 1) / left
	insts := []string{inst}
	recs, _ := a.log.List(ctx, pipeline.MachinePrefix+ft.m.Name+"/", false)
	for _, r := range recs {
		if other := strings.TrimPrefix(r.Key, pipeline.MachinePrefix+ft.m.Name+"/"); other != inst {
			insts = append(insts, other)
		}
	}
	for i, in := range insts {
		if per <= 0 {
			return
		}
		per -= e.chainOn(ctx, a, b, ft, in, d, rng, fmt.Sprintf("c%d-i%d", k, i), per)
	}
}

// chainOn runs up to n sequences on one instance and returns how many it
// ran.
func (e *Env) chainOn(ctx context.Context, a, b *rig, ft factTargets, inst string, d *drawer, rng *rand.Rand, tag string, n int) int {
	w := &e.wl
	subj := "machines." + ft.m.Name
	ran := 0
	for s := 0; s < n && ctx.Err() == nil; s++ {
		start, okA := a.machine(ctx, ft.m.Name, inst)
		now, okB := b.machine(ctx, ft.m.Name, inst)
		if !okA || !okB || now != start {
			return ran // diverged: the case that did it was reported
		}
		base := legalPathFrom(rng, ft, start, 1+rng.IntN(6), rng.IntN(2))
		if len(base) == 0 {
			return ran
		}
		payloads := make([]drawnEntry, len(base))
		for i := range base {
			base[i].id = fmt.Sprintf("%s-s%d-%s", tag, s, base[i].id)
			var ok bool
			if base[i].opens {
				payloads[i], ok = e.openerPayload(d, ft, inst, base[i])
			} else {
				payloads[i], ok = e.factPayload(d, ft, inst, base[i])
			}
			if !ok {
				return ran // the schema's fields cannot carry this event
			}
		}
		byID := map[string]drawnEntry{}
		for i, f := range base {
			byID[f.id] = payloads[i]
		}
		payload := func(f seqFact) drawnEntry {
			if de, ok := byID[f.id]; ok {
				return de
			}
			// a re-send under a new ID: the same report, another ID
			de, _ := e.factPayload(d, ft, inst, f)
			byID[f.id] = de
			return de
		}
		for _, f := range base {
			e.deliverEvent(ctx, a, payload(f), f, false)
		}
		want, _ := a.machine(ctx, ft.m.Name, inst)
		delivered := perturb(rng, base)
		trace := fmt.Sprintf("instance %s from %s; ordered %s; delivered %s", inst, start.AppendJSON(nil), describeSeq(base), describeSeq(delivered))
		prev := now
		for _, f := range delivered {
			de := payload(f)
			if de.typ == "" {
				continue
			}
			e.deliverEvent(ctx, b, de, f, true)
			cur, _ := b.machine(ctx, ft.m.Name, inst)
			if ft.m.IsTerminal(prev.State) && cur.State != prev.State {
				w.seq.add(Finding{Code: CodeTerminalLeft, Status: ir.StatusBlocked, Subject: subj,
					Message: fmt.Sprintf("instance %s left terminal state %s for %s after %s; %s", inst, prev.State, cur.State, f.id, trace),
					Fix:     "terminal states must quarantine every later fact"})
			}
			prev = cur
		}
		got, _ := b.machine(ctx, ft.m.Name, inst)
		w.seq.out.Cases++
		ran++
		// The whole record: the state, and the order and epoch the
		// guard goes on from.
		if got != want {
			w.seq.add(Finding{Code: CodeSequenceDiverges, Status: ir.StatusBlocked, Subject: subj,
				Message: fmt.Sprintf("ended in %s, the deduplicated ordered sequence ended in %s; %s", got.AppendJSON(nil), want.AppendJSON(nil), trace),
				Fix:     sequenceFix(ft, nil)})
			return ran
		}
	}
	return ran
}

// deliverEvent hands one event to a rig: a fact is reported (and its
// acknowledgement checked when instrument is set), an opener submitted as
// a request; either way it is committed before the next.
func (e *Env) deliverEvent(ctx context.Context, r *rig, de drawnEntry, f seqFact, instrument bool) {
	if !f.opens {
		e.report(ctx, r, de, instrument)
		return
	}
	r.p.SubmitAsync(ctx, pipeline.Entry{Type: de.typ, ID: de.id, Payload: de.data})
	r.drain(ctx)
}

// openerPayload builds a valid payload of ft's epoch opener moving
// instance inst to f.to in epoch f.scope.
func (e *Env) openerPayload(d *drawer, ft factTargets, inst string, f seqFact) (drawnEntry, bool) {
	en := ft.opener
	td, ok := e.Catalog.Type(en.Name)
	if !ok || td.ParseJSON == nil {
		return drawnEntry{}, false
	}
	obj := d.object(en.Fields)
	obj[ft.m.Key] = inst
	switch {
	case en.ToState != "":
	case en.ToMap != nil:
		for _, k := range sortedKeys(en.ToMap) {
			if en.ToMap[k] == f.to {
				obj[en.To] = k
				break
			}
		}
	case en.To != "":
		obj[en.To] = f.to
	}
	obj[en.OrderScope] = scopeValue(en, f.scope)
	data, err := json.Marshal(obj)
	if err != nil {
		return drawnEntry{}, false
	}
	p, err := td.ParseJSON(data)
	if err != nil || p.InstanceKey() != inst || p.TargetState() != f.to {
		return drawnEntry{}, false
	}
	return drawnEntry{typ: en.Name, class: en.Class, id: f.id, data: data}, true
}

// scopeValue is the JSON value of en's order_scope field for an epoch:
// a number for an integer field, else the string.
func scopeValue(en *ir.Entry, scope string) any {
	if f, ok := en.Field(en.OrderScope); ok && (f.Kind == ir.KindInt || f.Kind == ir.KindUint) {
		return jsonNumber(scope)
	}
	return scope
}
