package jobsgen

import (
	"errors"
	"reflect"
	"testing"

	"github.com/writ-dev/writ/schema/ir"
)

func TestParseJSONAndBinaryRoundTrip(t *testing.T) {
	cases := map[string]string{
		NameJobSubmit:        `{"job_id":"j1","queue":"default","priority":5,"command":"echo hi","cpu_millis":500}`,
		NameJobControl:       `{"job_id":"j1","action":"hold","reason":"maintenance"}`,
		NameQueueControl:     `{"queue":"default","action":"pause"}`,
		NameWorkerJoin:       `{"worker_id":"w1","capacity":4,"labels":["gpu","zone=eu-1"]}`,
		NameWorkerUpdate:     `{"worker_id":"w1","capacity":8}`,
		NameWorkerControl:    `{"worker_id":"w1","action":"drain"}`,
		NameJobStateReport:   `{"report_id":"r1","job_id":"j1","state":"RUNNING","seq":3,"worker_id":"w1"}`,
		NameWorkerUsage:      `{"report_id":"r2","worker_id":"w1","seq":1,"cpu_millis":10,"mem_bytes":1024}`,
		NameJobPendingReason: `{"report_id":"r3","job_id":"j1","reason":"no capacity","seq":2}`,
		NameWorkerDeath:      `{"report_id":"r4","worker_id":"w1","detected_by":"ctl-1"}`,
		NameJobDispatch:      `{"dispatch_id":"d1","scheduler":"s1","items":[{"job_id":"j1","worker_id":"w1"},{"job_id":"j2","worker_id":"w2"}]}`,
		NameJobAssign:        `{"job_id":"j1","worker_id":"w1"}`,
		NameClusterConfig:    `{"version":"1.2","settings":{"commit_timeout":"5s","max_batch":64,"log_level":"info"}}`,
	}
	cat := Catalog()
	if len(cases) != len(cat.Types()) {
		t.Fatalf("test covers %d types, catalog has %d", len(cases), len(cat.Types()))
	}
	for name, js := range cases {
		d, ok := cat.Type(name)
		if !ok {
			t.Fatalf("type %s not in catalog", name)
		}
		p, err := d.ParseJSON([]byte(js))
		if err != nil {
			t.Fatalf("%s: ParseJSON: %v", name, err)
		}
		b, err := EncodeEntry(p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := DecodeEntry(b)
		if err != nil {
			t.Fatalf("%s: DecodeEntry: %v", name, err)
		}
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("%s: binary round trip changed the payload:\n%#v\n%#v", name, p, q)
		}
	}
}

func TestParseJSONErrorsNameTheField(t *testing.T) {
	d, _ := Catalog().Type(NameJobSubmit)
	for _, tc := range []struct{ in, field, rule string }{
		{`{"job_id":"j1","queue":"q","priority":5,"command":"x","colour":1}`, "colour", "closed struct"},
		{`{"job_id":"j1","queue":"q","priority":5,"command":"x","Job_ID":"a"}`, "Job_ID", "closed struct"},
		{`{"job_id":"j1","queue":"q","priority":5}`, "command", "required"},
		{`{"job_id":"J1","queue":"q","priority":5,"command":"x"}`, "job_id", `=~"^[a-z0-9][a-z0-9._-]{0,62}$"`},
		{`{"job_id":"j1","queue":"q","priority":1001,"command":"x"}`, "priority", "<=1000"},
		{`{"job_id":"j1","queue":"q","priority":1.5,"command":"x"}`, "priority", "integer"},
		{`{"job_id":"j1","queue":"q","priority":5,"command":""}`, "command", "strings.MinRunes(1) & strings.MaxRunes(4096)"},
		{`{"job_id":"j1","queue":"q","priority":5,"command":"x","cpu_millis":null}`, "cpu_millis", "integer"},
	} {
		_, err := d.ParseJSON([]byte(tc.in))
		var fe *ir.FieldError
		if !errors.As(err, &fe) {
			t.Fatalf("%s: want FieldError, got %v", tc.in, err)
		}
		if fe.Field != tc.field || fe.Rule != tc.rule || fe.Type != NameJobSubmit {
			t.Errorf("%s: got field %q rule %q type %q (%v)", tc.in, fe.Field, fe.Rule, fe.Type, err)
		}
	}
	dd, _ := Catalog().Type(NameJobDispatch)
	_, err := dd.ParseJSON([]byte(`{"dispatch_id":"d1","scheduler":"s1","items":[{"job_id":"j1","worker_id":"w1"},{"job_id":"j2","worker_id":"W2"}]}`))
	var fe *ir.FieldError
	if !errors.As(err, &fe) || fe.Field != "items[1].worker_id" || fe.Type != NameJobDispatch {
		t.Fatalf("nested item error: %v", err)
	}
}

func TestRoutingAccessors(t *testing.T) {
	d, _ := Catalog().Type(NameJobControl)
	p, err := d.ParseJSON([]byte(`{"job_id":"j9","action":"cancel"}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.TargetState() != "CANCELLED" || p.InstanceKey() != "j9" || !reflect.DeepEqual(p.Keys(), []string{"job/j9"}) {
		t.Fatalf("job.control accessors: %q %q %v", p.TargetState(), p.InstanceKey(), p.Keys())
	}
	d, _ = Catalog().Type(NameJobStateReport)
	p, err = d.ParseJSON([]byte(`{"report_id":"r1","job_id":"j1","state":"FAILED","seq":7,"worker_id":"w1","exit_code":-1}`))
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := p.Order(); !ok || o != 7 || p.IdempotencyKey() != "r1" || p.TargetState() != "FAILED" {
		t.Fatalf("job.state_report accessors: %d %v %q %q", o, ok, p.IdempotencyKey(), p.TargetState())
	}
	d, _ = Catalog().Type(NameWorkerDeath)
	p, _ = d.ParseJSON([]byte(`{"report_id":"r4","worker_id":"w1","detected_by":"ctl-1"}`))
	if _, ok := p.Order(); ok {
		t.Fatal("worker.death without seq must report no order")
	}
	d, _ = Catalog().Type(NameJobDispatch)
	p, _ = d.ParseJSON([]byte(`{"dispatch_id":"d1","scheduler":"s1","items":[{"job_id":"j1","worker_id":"w1"}]}`))
	if items := p.Items(); len(items) != 1 || items[0].EntryType() != NameJobAssign || items[0].TargetState() != "DISPATCHED" {
		t.Fatalf("items: %v", items)
	}
}

func TestClassificationIsExhaustive(t *testing.T) {
	cat := Catalog()
	for _, d := range cat.Types() {
		if Classify(d.Name) != d.Class || !d.Class.Valid() {
			t.Errorf("%s: Classify=%v desc=%v", d.Name, Classify(d.Name), d.Class)
		}
		if got, ok := cat.TypeByNumber(d.Number); !ok || got != d {
			t.Errorf("%s: TypeByNumber(%d) mismatch", d.Name, d.Number)
		}
		if d.Entry.Machine != "" && (d.Machine == nil || d.Machine.Name != d.Entry.Machine) {
			t.Errorf("%s: machine not wired", d.Name)
		}
	}
	if _, ok := cat.Type("job.teleport"); ok {
		t.Fatal("undeclared type must not be found")
	}
	if Classify("job.teleport") != ir.ClassUnknown {
		t.Fatal("undeclared type must be unclassified")
	}
	if cat.Fingerprint() != cat.Schema().Fingerprint() {
		t.Fatal("generated fingerprint differs from the embedded model's")
	}
}

func TestGuardTables(t *testing.T) {
	m, _ := Catalog().Machine("job")
	for _, from := range JobStates {
		for _, to := range JobStates {
			if JobAllowed(from, to) != m.Allowed(from.String(), to.String()) {
				t.Errorf("job %s→%s: table %v model %v", from, to, JobAllowed(from, to), m.Allowed(from.String(), to.String()))
			}
		}
		if from.Terminal() != m.IsTerminal(from.String()) || from.Initial() != m.IsInitial(from.String()) {
			t.Errorf("job %s: terminal/initial mismatch", from)
		}
	}
	if JobAllowed(JobCompleted, JobRunning) || !JobAllowed(JobPending, JobDispatched) || !WorkerAllowed(WorkerDead, WorkerReady) {
		t.Fatal("guard table does not match the schema")
	}
}

func TestParseJSONRejectsInvalidUTF8(t *testing.T) {
	d, _ := Catalog().Type(NameJobControl)
	for _, in := range []string{
		"{\"job_id\":\"j1\",\"action\":\"hold\",\"reason\":\"bad \xff byte\"}",
		"{\"job_id\":\"j1\",\"action\":\"hold\",\"reason\":\"esc\\n and bad \xff byte\"}",
	} {
		_, err := d.ParseJSON([]byte(in))
		var fe *ir.FieldError
		if !errors.As(err, &fe) || fe.Field != "reason" {
			t.Errorf("%q: want a FieldError on reason, got %v", in, err)
		}
	}
}
