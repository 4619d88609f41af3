package runtimecat_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/schema/ir"
	"github.com/writ-dev/writ/schema/runtimecat/internal/rolloutgen"
)

// fuzzPair is a runtime catalog and the generated catalog of one schema.
type fuzzPair struct{ rt, gen ir.Catalog }

func fuzzPairs(f *testing.F) []fuzzPair {
	jobs := loadSchema(f, "../../examples/jobs/schema")
	roll := loadSchema(f, rolloutDir)
	return []fuzzPair{{newRuntime(f, jobs.Schema), jobsgen.Catalog()}, {newRuntime(f, roll.Schema), rolloutgen.Catalog()}}
}

var fuzzSeeds = []string{
	`{"job_id":"j1","queue":"default","priority":5,"command":"echo hi","cpu_millis":500}`,
	`{"dispatch_id":"d1","scheduler":"s1","items":[{"job_id":"j1","worker_id":"w1"},{"job_id":"j2","worker_id":"w2"}]}`,
	`{"version":"1.2","settings":{"commit_timeout":"5s","max_batch":64,"log_level":"info"}}`,
	`{"worker_id":"w1","capacity":4,"labels":["gpu","zone=eu-1"]}`,
	`{"rollout_id":"r1","service":"web","replicas":3,"canary_fraction":0.5,"weight":-2,"dry_run":false,"labels":["a"],"spec":{"image":"img:1","env":[{"name":"A_B","value":"x"}]},"window":{"start_second":5,"minutes":10}}`,
	`{"report_id":"p1","rollout_id":"r1","state":"DONE","seq":-1,"wave":3,"healthy":1,"errors":[500]}`,
	`{"batch_id":"b1","steps":[{"rollout_id":"r1","step":2,"action":"pause"}]}`,
	`{"a\u0062":1, "job_id" : "x\"y" }`, `[]`, `{"job_id":1e400}`, `{"job_id":"j1","job_id":"j1"}`,
}

// checkErr: every refusal is a *ir.FieldError of the parsed type whose
// message says how to fix it.
func checkErr(t *testing.T, typ string, err error) {
	fe, ok := err.(*ir.FieldError)
	if !ok {
		t.Fatalf("%s: error %T is not a *ir.FieldError: %v", typ, err, err)
	}
	if fe.Type != typ || fe.Rule == "" || !strings.Contains(fe.Msg, "fix") && !strings.Contains(fe.Msg, "JSON object") && !strings.Contains(fe.Msg, "malformed key") {
		t.Fatalf("%s: error does not name the type, rule and fix: %#v", typ, fe)
	}
}

// FuzzParseJSON: on any input and any type, the runtime catalog never
// panics and answers exactly as the generated code does.
func FuzzParseJSON(f *testing.F) {
	pairs := fuzzPairs(f)
	for i, s := range fuzzSeeds {
		f.Add(uint8(i), []byte(s))
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		sameParse(t, pairs, which, data, func(td *ir.TypeDesc) func([]byte) (ir.Payload, error) { return td.ParseJSON })
	})
}

// FuzzParseBinary: the same for the stable binary encoding.
func FuzzParseBinary(f *testing.F) {
	pairs := fuzzPairs(f)
	for i, s := range fuzzSeeds {
		for _, p := range pairs {
			for j, td := range p.rt.Types() {
				if pl, err := td.ParseJSON([]byte(s)); err == nil {
					b, _ := pl.AppendBinary(nil)
					f.Add(uint8(j*len(pairs)+indexOf(pairs, p)), b)
				}
			}
		}
		f.Add(uint8(i), []byte(s))
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		sameParse(t, pairs, which, data, func(td *ir.TypeDesc) func([]byte) (ir.Payload, error) { return td.ParseBinary })
	})
}

func indexOf(ps []fuzzPair, p fuzzPair) int {
	for i := range ps {
		if ps[i] == p {
			return i
		}
	}
	return 0
}

// sameParse decodes data as the type which picks, with the decoder parse
// picks, in the runtime and the generated catalog, and fails t unless both
// answer the same (the same error, or equal payloads).
func sameParse(t *testing.T, pairs []fuzzPair, which uint8, data []byte, parse func(*ir.TypeDesc) func([]byte) (ir.Payload, error)) {
	t.Helper()
	p := pairs[int(which)%len(pairs)]
	types := p.rt.Types()
	td := types[int(which)/len(pairs)%len(types)]
	gd, _ := p.gen.Type(td.Name)
	rp, rerr := parse(td)(data)
	gp, gerr := parse(gd)(data)
	if !reflect.DeepEqual(rerr, gerr) {
		t.Fatalf("%s: runtime %v, generated %v on %q", td.Name, rerr, gerr, data)
	}
	if rerr != nil {
		checkErr(t, td.Name, rerr)
		return
	}
	samePayload(t, td.Name, rp, gp)
}
