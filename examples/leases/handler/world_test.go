package handler_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/writ-dev/writ/examples/leases/handler"
	"github.com/writ-dev/writ/examples/leases/leasesgen"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/plugins/sdk"
	"github.com/writ-dev/writ/plugins/sdk/sdktest"
	"github.com/writ-dev/writ/schema/ir"
)

// world drives the handler the way the pipeline does, over sdktest's
// in-memory store (a test stand-in for the replicated log): it decides each
// entry's own transition with the pipeline's real guard (pipeline.Decide)
// before evaluation, skips the handler on any verdict but apply,
// deduplicates facts by ID, hands the handler the keys its schema names
// plus its machine record, re-evaluates with NeedKeys added, applies the
// writes with the CAS rule, and writes the machine records of the entry's
// transition and of the handler's extra transitions (each guarded too).
type world struct {
	t     testing.TB
	h     *sdktest.Harness
	s     *sdktest.Store
	n     int
	facts map[string]bool
	// quarantined counts fact transitions the guard quarantined.
	quarantined int
}

func newWorld(t testing.TB) *world {
	return &world{t: t, h: sdktest.New(t, handler.Plugin()), s: sdktest.NewStore(), facts: map[string]bool{}}
}

// step is what one entry did.
type step struct {
	verdict pipeline.Verdict
	res     sdk.Result
	// refused is set when the handler answered with an error.
	refused bool
}

func (w *world) machine(name, inst string) (pipeline.MachineRecord, bool) {
	rec, ok := w.s.Get(pipeline.MachineKey(name, inst))
	if !ok {
		return pipeline.MachineRecord{}, false
	}
	mr, err := pipeline.ParseMachineRecord(rec.Value)
	if err != nil {
		w.t.Fatalf("machine record %s: %v", rec.Key, err)
	}
	return mr, true
}

func (w *world) setMachine(name, inst string, mr pipeline.MachineRecord) {
	w.s.Set(pipeline.MachineKey(name, inst), mr.AppendJSON(nil))
}

func (w *world) eval(typ, payload string) step {
	w.t.Helper()
	desc, ok := leasesgen.Catalog().Type(typ)
	if !ok {
		w.t.Fatalf("unknown type %s", typ)
	}
	p, err := desc.ParseJSON([]byte(payload))
	if err != nil {
		return step{refused: true, res: sdk.Result{Err: &sdk.Error{Kind: sdk.KindValidation, Msg: err.Error()}}}
	}
	if desc.Class == ir.ClassFact {
		id := typ + ":" + p.IdempotencyKey()
		if w.facts[id] {
			return step{verdict: pipeline.VerdictDuplicate}
		}
		w.facts[id] = true
	}
	keys := p.Keys()
	var own *pipeline.MachineRecord
	if desc.Machine != nil {
		keys = append(keys, pipeline.MachineKey(desc.Machine.Name, p.InstanceKey()))
		if to := p.TargetState(); to != "" {
			cur, exists := w.machine(desc.Machine.Name, p.InstanceKey())
			order, has := p.Order()
			illegal := pipeline.VerdictReject
			if desc.Class == ir.ClassFact {
				illegal = pipeline.VerdictQuarantine
			}
			v, _ := pipeline.Decide(desc.Machine, cur, exists, to, order, has, illegal)
			if v != pipeline.VerdictApply {
				if v == pipeline.VerdictQuarantine {
					w.quarantined++
				}
				return step{verdict: v}
			}
			next := pipeline.MachineRecord{State: to, Order: order, HasOrder: has}
			if !has && cur.HasOrder {
				next.Order, next.HasOrder = cur.Order, true
			}
			own = &next
		}
	}
	w.n++
	id := fmt.Sprintf("e%d", w.n)
	for round := 0; ; round++ {
		r := w.h.Eval(typ, id, payload, w.s.State(keys...)...)
		if len(r.NeedKeys) > 0 {
			if round == 4 {
				w.t.Fatalf("%s: still asking for keys after %d rounds: %v", typ, round, r.NeedKeys)
			}
			keys = append(keys, r.NeedKeys...)
			continue
		}
		if r.Err != nil {
			return step{verdict: pipeline.VerdictApply, res: r, refused: true}
		}
		if err := w.s.Apply(r); err != nil {
			w.t.Fatalf("%s %s: %v", typ, payload, err)
		}
		if own != nil {
			w.setMachine(desc.Machine.Name, p.InstanceKey(), *own)
		}
		for _, tr := range r.Transitions {
			m, ok := leasesgen.Catalog().Machine(tr.Machine)
			if !ok {
				w.t.Fatalf("%s: transition of unknown machine %q", typ, tr.Machine)
			}
			cur, exists := w.machine(tr.Machine, tr.Key)
			if v, why := pipeline.Decide(m, cur, exists, tr.To, 0, false, pipeline.VerdictQuarantine); v == pipeline.VerdictApply {
				w.setMachine(tr.Machine, tr.Key, pipeline.MachineRecord{State: tr.To, Order: cur.Order, HasOrder: cur.HasOrder})
			} else if v != pipeline.VerdictDuplicate {
				w.t.Fatalf("%s: handler transition %s/%s → %s: %s %s", typ, tr.Machine, tr.Key, tr.To, v, why)
			}
		}
		return step{verdict: pipeline.VerdictApply, res: r}
	}
}

// ok evaluates an entry that must apply and returns its result.
func (w *world) ok(typ, payload string) sdk.Result {
	w.t.Helper()
	st := w.eval(typ, payload)
	if st.verdict != pipeline.VerdictApply || st.refused {
		w.t.Fatalf("%s %.200s: want applied, got verdict %s, err %v", typ, payload, st.verdict, st.res.Err)
	}
	return st.res
}

// refused evaluates an entry the handler must refuse with kind, its
// message containing contains.
func (w *world) refused(typ, payload string, kind sdk.ErrorKind, contains string) {
	w.t.Helper()
	st := w.eval(typ, payload)
	if !st.refused || st.res.Err.Kind != kind || !strings.Contains(st.res.Err.Msg, contains) {
		w.t.Fatalf("%s %s: want %v error containing %q, got verdict %s err %v", typ, payload, kind, contains, st.verdict, st.res.Err)
	}
}

// guarded evaluates an entry the guard must decide as v without the handler.
func (w *world) guarded(typ, payload string, v pipeline.Verdict) {
	w.t.Helper()
	if st := w.eval(typ, payload); st.verdict != v {
		w.t.Fatalf("%s %s: want verdict %s, got %s (err %v)", typ, payload, v, st.verdict, st.res.Err)
	}
}

func (w *world) doc(key string, v any) bool {
	w.t.Helper()
	rec, ok := w.s.Get(key)
	if !ok {
		return false
	}
	if err := json.Unmarshal(rec.Value, v); err != nil {
		w.t.Fatalf("%s holds malformed JSON: %v", key, err)
	}
	return true
}

func (w *world) lease(id string) handler.Lease {
	w.t.Helper()
	var l handler.Lease
	if !w.doc("lease/"+id, &l) {
		w.t.Fatalf("lease %s has no document", id)
	}
	return l
}

func (w *world) holder(id string) handler.Holder {
	w.t.Helper()
	var h handler.Holder
	if !w.doc("holder/"+id, &h) {
		w.t.Fatalf("holder %s has no document", id)
	}
	return h
}

// state is the machine state of an instance ("" when absent).
func (w *world) state(machine, inst string) string {
	mr, _ := w.machine(machine, inst)
	return mr.State
}
