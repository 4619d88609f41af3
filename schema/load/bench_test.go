package load

import (
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	cuejson "cuelang.org/go/encoding/json"
)

// BenchmarkCUEValidateJobSubmit is CUE's own evaluation of a job.submit
// JSON payload against the (pre-built, closed) payload definition: the cost
// the generated validator avoids (compare with examples/jobs/jobsgen
// BenchmarkJobSubmitDecodeValidate).
func BenchmarkCUEValidateJobSubmit(b *testing.B) {
	r, err := Dir("../../examples/jobs/schema")
	if err != nil || r.Failed() {
		b.Fatal(err, r.Err())
	}
	pv, err := r.PayloadValue("job.submit")
	if err != nil {
		b.Fatal(err)
	}
	ctx := cuecontext.New()
	data := []byte(`{"job_id":"j1","queue":"default","priority":5,"command":"echo hi","cpu_millis":500,"mem_bytes":1048576}`)
	b.ReportAllocs()
	for b.Loop() {
		expr, err := cuejson.Extract("p.json", data)
		if err != nil {
			b.Fatal(err)
		}
		if err := pv.Unify(ctx.BuildExpr(expr)).Validate(cue.Concrete(true), cue.Final()); err != nil {
			b.Fatal(err)
		}
	}
}
