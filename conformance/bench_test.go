package conformance

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/schema/load"
)

// BenchmarkGuardSequence: one property.guard-sequences case (draw a legal
// path, perturb it, fold both through pipeline.Decide).
func BenchmarkGuardSequence(b *testing.B) {
	res, err := load.Dir(jobsSchema)
	if err != nil || res.Schema == nil {
		b.Fatal(err, res.Err())
	}
	e := &Env{Schema: res.Schema}
	fts := e.factTargets()
	m := fts[0]
	rng := rand.New(rand.NewPCG(1, 2))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		start := pipeline.MachineRecord{State: m.m.States[i%len(m.m.States)]}
		base := legalPath(rng, m, start.State, 5)
		foldGuard(pipeline.DecideIncoming, m.m, start, base)
		foldGuard(pipeline.DecideIncoming, m.m, start, perturb(rng, base))
	}
}

// BenchmarkValidateCase: one property.validate-cue case (draw, mutate,
// generated validation, CUE oracle).
func BenchmarkValidateCase(b *testing.B) {
	res, err := load.Dir(jobsSchema)
	if err != nil || res.Schema == nil {
		b.Fatal(err, res.Err())
	}
	td, _ := jobsgen.Catalog().Type("job.state_report")
	en, _ := res.Schema.Entry("job.state_report")
	d := newDrawer(res.Schema, 1, 1)
	b.ReportAllocs()
	for b.Loop() {
		obj := d.object(en.Fields)
		if d.rng.IntN(2) == 0 {
			d.mutate(obj, en.Fields)
		}
		data, _ := json.Marshal(obj)
		_, _ = td.ParseJSON(data)
		_ = res.CheckPayloadJSON(td.Name, data)
	}
}
