package pipeline

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/schema/ir"
)

type drawnCatalog struct {
	ir.Catalog
	m *ir.Machine
}

func (c drawnCatalog) Machine(name string) (*ir.Machine, bool) { return c.m, name == c.m.Name }

// drawMachine draws a cyclic machine over 2–5 states: every non-terminal
// state may move to every other (so a reordered delivery never needs an
// undeclared step), some to themselves, and sometimes a terminal state
// every other state may move to.
func drawMachine(t *rapid.T) *ir.Machine {
	n := rapid.IntRange(2, 5).Draw(t, "states")
	m := &ir.Machine{Name: "m", Key: "id", Initial: []string{"S0"}, Terminal: []string{}, Transitions: map[string][]string{}}
	for i := 0; i < n; i++ {
		m.States = append(m.States, fmt.Sprintf("S%d", i))
	}
	terminal := rapid.Bool().Draw(t, "terminal")
	if terminal {
		m.Terminal = []string{m.States[n-1]}
	}
	for i, from := range m.States {
		if terminal && i == n-1 {
			continue
		}
		for _, to := range m.States {
			if to != from || rapid.Bool().Draw(t, "self") {
				m.Transitions[from] = append(m.Transitions[from], to)
			}
		}
	}
	return m
}

// event is one entry of a drawn history: a fact, or an epoch opener.
type event struct {
	id string
	in Incoming
}

// replica applies commands the way raftstore does, with the apply-time
// Checker first: a vetoed command or a failed revision precondition
// changes nothing.
type replica struct {
	st  mapReader
	rev uint64
	chk *Checker
}

// submit evaluates ev against the replica's state as the pipeline does
// (guard, transition, record write) and applies it. It returns the
// verdict and the checker's answer.
func (r *replica) submit(m *ir.Machine, ev event) (Verdict, error) {
	key := MachineKey(m.Name, "i")
	rec, exists := r.st[key]
	var cur MachineRecord
	if exists {
		var err error
		if cur, err = ParseMachineRecord(rec.Value); err != nil {
			return 0, err
		}
	}
	illegal := VerdictQuarantine
	class := ir.ClassFact
	if ev.in.Opens {
		illegal, class = VerdictReject, ir.ClassRequest
	}
	v, _ := decide(m, cur, exists, ev.in, illegal, false)
	tr := newGuardTransition(m.Name, "i", rec.Rev, cur, exists, ev.in, v)
	cmd := kv.Command{ID: ev.id, Class: uint8(class), Verdict: uint8(v), Guard: (&guardInfo{Transitions: []guardTransition{tr}}).appendTo(nil)}
	switch {
	case v == VerdictApply:
		cmd.Effect.Writes = []kv.Write{machineWrite(tr)}
	case v == VerdictReject:
		return v, nil // not appended
	default:
		if w, ok := recordWrite(&tr); ok {
			cmd.Effect.Writes = []kv.Write{w}
		}
	}
	if err := r.chk.Check(&cmd, r.st); err != nil {
		return v, err
	}
	r.rev++
	for _, w := range cmd.Effect.Writes {
		if got := r.st[w.Key].Rev; got != w.IfRev {
			return v, fmt.Errorf("precondition of %s: rev %d, want %d", w.Key, got, w.IfRev)
		}
	}
	for _, w := range cmd.Effect.Writes {
		r.st[w.Key] = kv.Record{Key: w.Key, Value: w.Value, Rev: r.rev}
	}
	return v, nil
}

func (r *replica) record() MachineRecord {
	rec, ok := r.st[MachineKey("m", "i")]
	if !ok {
		return MachineRecord{}
	}
	mr, _ := ParseMachineRecord(rec.Value)
	return mr
}

// TestGuardProperty_CyclesAndEpochs: over random machines (cyclic ones
// included) and random legal histories of ordered reports and epoch
// openers, a delivery with duplicates, re-sends, reorderings within an
// epoch and late reports of earlier epochs ends in exactly the record of
// the ordered history; the apply-time Checker accepts every command
// evaluation built, and a second replica applying the same history ends
// the same.
func TestGuardProperty_CyclesAndEpochs(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := drawMachine(t)
		chk := NewChecker(drawnCatalog{m: m})
		// the ordered history: a creation opening epoch e0, then reports
		// and openers along declared transitions and re-reports
		hist := []event{{id: "open0", in: Incoming{To: "S0", Scope: "e0", HasScope: true, Opens: true}}}
		cur, scope, order := "S0", "e0", uint64(0)
		var segments [][]event // reports per epoch
		segments = append(segments, nil)
		for i, n := 0, rapid.IntRange(1, 14).Draw(t, "len"); i < n; i++ {
			to := m.States[rapid.IntRange(0, len(m.States)-1).Draw(t, "to")]
			if rapid.IntRange(0, 4).Draw(t, "kind") == 0 {
				if !m.Allowed(cur, to) {
					continue
				}
				scope, order, cur = fmt.Sprintf("e%d", len(segments)), 0, to
				hist = append(hist, event{id: "open-" + scope, in: Incoming{To: to, Scope: scope, HasScope: true, Opens: true}})
				segments = append(segments, nil)
				continue
			}
			if to != cur && !m.Allowed(cur, to) {
				continue
			}
			order += rapid.Uint64Range(1, 3).Draw(t, "gap")
			ev := event{id: fmt.Sprintf("f%d", i), in: Incoming{To: to, Order: order, HasOrder: true, Scope: scope, HasScope: true}}
			hist = append(hist, ev)
			segments[len(segments)-1] = append(segments[len(segments)-1], ev)
			cur = to
		}
		want := &replica{st: mapReader{}, chk: chk}
		for _, ev := range hist {
			if v, err := want.submit(m, ev); err != nil || v == VerdictReject || v == VerdictQuarantine {
				t.Fatalf("ordered history %v: %s got %s, %v", hist, ev.id, v, err)
			}
		}
		// the delivery: each epoch's reports permuted and duplicated after
		// its opener; late copies of earlier epochs' reports after later
		// openers
		var delivered []event
		seg := 0
		for _, ev := range hist {
			delivered = append(delivered, ev)
			if !ev.in.Opens {
				continue
			}
			reports := segments[seg]
			seg++
			var copies []event
			for _, r := range reports {
				for n := rapid.IntRange(1, 3).Draw(t, "copies"); n > 0; n-- {
					c := r
					if rapid.Bool().Draw(t, "resend") {
						c.id += fmt.Sprintf("-resent%d", n)
					}
					copies = append(copies, c)
				}
			}
			if len(copies) > 0 {
				copies = rapid.Permutation(copies).Draw(t, "order")
			}
			if seg > 1 && len(segments[seg-2]) > 0 && rapid.Bool().Draw(t, "late") {
				late := segments[seg-2][rapid.IntRange(0, len(segments[seg-2])-1).Draw(t, "which")]
				late.id += "-late"
				copies = append(copies, late)
			}
			delivered = append(delivered, copies...)
		}
		got, other := &replica{st: mapReader{}, chk: chk}, &replica{st: mapReader{}, chk: chk}
		seen := map[string]bool{}
		for _, ev := range delivered {
			if seen[ev.id] {
				continue // deduplicated by ID
			}
			seen[ev.id] = true
			before := got.record()
			v, err := got.submit(m, ev)
			if err != nil {
				t.Fatalf("delivery %v: the apply-time checker vetoed %s (%s): %v", delivered, ev.id, v, err)
			}
			if _, err := other.submit(m, ev); err != nil {
				t.Fatalf("second replica vetoed %s: %v", ev.id, err)
			}
			if m.IsTerminal(before.State) && got.record().State != before.State {
				t.Fatalf("terminal %s left by %s", before.State, ev.id)
			}
		}
		if got.record() != want.record() || other.record() != want.record() {
			t.Fatalf("history %v delivered as %v: record %+v (second replica %+v), want %+v", hist, delivered, got.record(), other.record(), want.record())
		}
	})
}
