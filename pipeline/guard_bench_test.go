package pipeline

import (
	"testing"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/schema/ir"
)

// BenchmarkCheckReport measures the apply-time check of one report that
// applies (RUNNING@3 → COMPLETED@4), without and with an order epoch.
func BenchmarkCheckReport(b *testing.B) {
	for _, bc := range []struct {
		name string
		cur  MachineRecord
		in   Incoming
	}{
		{"unscoped", MachineRecord{State: "RUNNING", Order: 3, HasOrder: true}, at("COMPLETED", 4)},
		{"epoch", MachineRecord{State: "RUNNING", Order: 3, HasOrder: true, Scope: "worker-17", HasScope: true}, in("COMPLETED", 4, "worker-17")},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := NewChecker(oneMachineCatalog{})
			st := mapReader{"_m/job/j1": {Key: "_m/job/j1", Value: bc.cur.AppendJSON(nil), Rev: 5}}
			v, _ := DecideIncoming(testJob, bc.cur, true, bc.in, VerdictQuarantine)
			tr := newGuardTransition("job", "j1", 5, bc.cur, true, bc.in, v)
			cmd := kv.Command{ID: "fact:x", Class: uint8(ir.ClassFact), Verdict: uint8(v),
				Guard: (&guardInfo{Transitions: []guardTransition{tr}}).appendTo(nil), Effect: kv.Effect{Writes: []kv.Write{machineWrite(tr)}}}
			b.ReportAllocs()
			for b.Loop() {
				if err := c.Check(&cmd, st); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
