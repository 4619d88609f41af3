package handler_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/writ-dev/writ/examples/jobs/handler"
	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/internal/depcheck"
	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/plugins/sdk"
	"github.com/writ-dev/writ/plugins/sdk/sdktest"
)

func TestImportRules(t *testing.T) {
	for _, pkg := range []string{"github.com/writ-dev/writ/examples/jobs/handler", "github.com/writ-dev/writ/examples/jobs/cmd/writ-jobs"} {
		depcheck.Forbid(t, pkg,
			"github.com/writ-dev/writ/plugins/host", "github.com/writ-dev/writ/pipeline",
			"github.com/writ-dev/writ/raftstore", "github.com/writ-dev/writ/membership",
			"github.com/spf13/viper", "go.etcd.io", "github.com/hashicorp/serf", "cuelang.org/go")
	}
}

func TestServesEveryEvaluatedType(t *testing.T) {
	p := handler.Plugin()
	for _, d := range jobsgen.Catalog().Types() {
		_, served := p.Handlers[d.Name]
		evaluated := d.Class.String() == "request" || d.Class.String() == "fact"
		if served != evaluated {
			t.Errorf("type %s (class %s): served=%v, want %v", d.Name, d.Class, served, evaluated)
		}
	}
}

// world drives the handler the way the pipeline does, over an in-memory
// store (a test stand-in for the replicated log): it hands each entry the
// keys its schema names plus its machine record, re-evaluates with NeedKeys
// added, applies the writes with the CAS rule and records machine
// transitions in "_m/" records.
type world struct {
	t *testing.T
	h *sdktest.Harness
	s *sdktest.Store
	n int
}

func newWorld(t *testing.T) *world {
	return &world{t: t, h: sdktest.New(t, handler.Plugin()), s: sdktest.NewStore()}
}

func (w *world) eval(typ, payload string) sdk.Result {
	w.t.Helper()
	desc, ok := jobsgen.Catalog().Type(typ)
	if !ok {
		w.t.Fatalf("unknown type %s", typ)
	}
	p, err := desc.ParseJSON([]byte(payload))
	if err != nil {
		return sdk.Result{Err: &sdk.Error{Kind: sdk.KindValidation, Msg: err.Error()}}
	}
	keys := p.Keys()
	if desc.Machine != nil {
		keys = append(keys, sdk.MachinePrefix+desc.Machine.Name+"/"+p.InstanceKey())
	}
	w.n++
	id := fmt.Sprintf("e%d", w.n)
	for round := 0; ; round++ {
		r := w.h.Eval(typ, id, payload, w.s.State(keys...)...)
		if len(r.NeedKeys) == 0 {
			if r.Err == nil {
				if err := w.s.Apply(r); err != nil {
					w.t.Fatalf("%s %s: %v", typ, payload, err)
				}
				if to := p.TargetState(); to != "" && len(r.Writes) > 0 {
					w.setMachine(desc.Machine.Name, p.InstanceKey(), to)
				}
				for _, tr := range r.Transitions {
					w.setMachine(tr.Machine, tr.Key, tr.To)
				}
			}
			return r
		}
		if round == 3 {
			w.t.Fatalf("%s: still asking for keys after %d rounds: %v", typ, round, r.NeedKeys)
		}
		keys = append(keys, r.NeedKeys...)
	}
}

func (w *world) setMachine(machine, key, to string) {
	w.s.Set(sdk.MachinePrefix+machine+"/"+key, fmt.Appendf(nil, `{"state":%q}`, to))
}

func (w *world) ok(typ, payload string) sdk.Result {
	w.t.Helper()
	r := w.eval(typ, payload)
	if r.Err != nil {
		w.t.Fatalf("%s %s: unexpected error %v", typ, payload, r.Err)
	}
	return r
}

func (w *world) refused(typ, payload string, kind sdk.ErrorKind, contains string) {
	w.t.Helper()
	r := w.eval(typ, payload)
	if r.Err == nil || r.Err.Kind != kind || !strings.Contains(r.Err.Msg, contains) {
		w.t.Fatalf("%s %s: want %v error containing %q, got %+v (err %v)", typ, payload, kind, contains, r, r.Err)
	}
}

func (w *world) noop(typ, payload string) {
	w.t.Helper()
	r := w.eval(typ, payload)
	if r.Err != nil || len(r.Writes) != 0 || len(r.Transitions) != 0 {
		w.t.Fatalf("%s %s: want no change, got %+v (err %v)", typ, payload, r, r.Err)
	}
}

func (w *world) job(id string) handler.Job {
	w.t.Helper()
	var j handler.Job
	w.doc("job/"+id, &j)
	return j
}

func (w *world) worker(id string) handler.Worker {
	w.t.Helper()
	var x handler.Worker
	w.doc("worker/"+id, &x)
	return x
}

func (w *world) doc(key string, v any) {
	w.t.Helper()
	r, ok := w.s.Get(key)
	if !ok {
		w.t.Fatalf("%s does not exist", key)
	}
	if err := json.Unmarshal(r.Value, v); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) machine(m, id string) string {
	r, ok := w.s.Get(sdk.MachinePrefix + m + "/" + id)
	if !ok {
		return ""
	}
	var s struct{ State string }
	_ = json.Unmarshal(r.Value, &s)
	return s.State
}

func submit(job, queue string) string {
	return fmt.Sprintf(`{"job_id":%q,"queue":%q,"priority":5,"command":"echo hi"}`, job, queue)
}

func TestQueuesAndSubmit_FakeStore(t *testing.T) {
	w := newWorld(t)
	w.refused("job.submit", submit("j1", "q1"), sdk.KindRule, `queue "q1" does not exist`)
	w.refused("queue.control", `{"queue":"q1","action":"pause"}`, sdk.KindRule, "does not exist")
	w.ok("queue.control", `{"queue":"q1","action":"create"}`)
	w.refused("queue.control", `{"queue":"q1","action":"create"}`, sdk.KindRule, "already exists")

	r := w.ok("job.submit", `{"job_id":"j1","queue":"q1","priority":7,"command":"make","cpu_millis":500}`)
	if got := string(r.Result); got != `{"job_id":"j1","state":"PENDING"}` {
		t.Fatalf("submit result %s", got)
	}
	if wr, _ := sdktest.Written(r, "job/j1"); wr.IfRev != 0 {
		t.Fatalf("job creation must be guarded by absence, got IfRev %d", wr.IfRev)
	}
	if j := w.job("j1"); j.Queue != "q1" || j.Priority != 7 || j.Command != "make" || j.CPUMillis != 500 || j.State != handler.Pending {
		t.Fatalf("job doc %+v", j)
	}
	w.refused("job.submit", submit("j1", "q1"), sdk.KindRule, "already exists")

	for _, c := range []struct{ action, state string }{{"pause", "PAUSED"}, {"resume", ""}, {"drain", "DRAINING"}} {
		w.ok("queue.control", fmt.Sprintf(`{"queue":"q1","action":%q}`, c.action))
		if c.state != "" {
			w.refused("job.submit", submit("j2", "q1"), sdk.KindRule, c.state)
			w.ok("queue.control", `{"queue":"q1","action":"resume"}`)
		}
	}
	w.ok("queue.control", `{"queue":"q1","action":"drain"}`)
	w.refused("queue.control", `{"queue":"q1","action":"pause"}`, sdk.KindRule, "DRAINING")
	w.ok("queue.control", `{"queue":"q1","action":"resume"}`)
	w.ok("job.submit", submit("j2", "q1"))
}

func TestValidationComesFromGeneratedCode(t *testing.T) {
	h := sdktest.New(t, handler.Plugin())
	for _, c := range []struct{ typ, payload, field string }{
		{"job.submit", `{"job_id":"j1","queue":"q1","priority":5000,"command":"x"}`, "priority"},
		{"job.submit", `{"job_id":"J1!","queue":"q1","priority":1,"command":"x"}`, "job_id"},
		{"job.submit", `{"job_id":"j1","queue":"q1","priority":1,"command":"x","colour":"red"}`, "colour"},
		{"job.control", `{"job_id":"j1","action":"explode"}`, "action"},
		{"worker.join", `{"worker_id":"w1","capacity":0}`, "capacity"},
	} {
		r := h.Eval(c.typ, "id", c.payload)
		if r.Err == nil || r.Err.Kind != sdk.KindValidation || !strings.Contains(r.Err.Msg, c.field) {
			t.Errorf("%s %s: want validation error naming %q, got %+v", c.typ, c.payload, c.field, r.Err)
		}
	}
}

func TestJobControl_FakeStore(t *testing.T) {
	w := newWorld(t)
	w.refused("job.control", `{"job_id":"j1","action":"cancel"}`, sdk.KindRule, "does not exist")
	w.ok("queue.control", `{"queue":"q","action":"create"}`)
	w.ok("job.submit", submit("j1", "q"))
	w.refused("job.control", `{"job_id":"j1","action":"release"}`, sdk.KindRule, "only a HELD job")
	w.ok("job.control", `{"job_id":"j1","action":"hold","reason":"wait for data"}`)
	if j := w.job("j1"); j.State != handler.Held || j.Reason != "wait for data" || w.machine("job", "j1") != handler.Held {
		t.Fatalf("held job %+v", j)
	}
	w.refused("job.control", `{"job_id":"j1","action":"hold"}`, sdk.KindRule, "only a PENDING job")
	w.ok("job.control", `{"job_id":"j1","action":"release"}`)
	w.ok("job.control", `{"job_id":"j1","action":"cancel"}`)
	if j := w.job("j1"); j.State != handler.Cancelled {
		t.Fatalf("cancelled job %+v", j)
	}
	w.refused("job.control", `{"job_id":"j1","action":"cancel"}`, sdk.KindRule, "cannot be cancelled")
}

func TestWorkersAssignAndReports_FakeStore(t *testing.T) {
	w := newWorld(t)
	w.ok("queue.control", `{"queue":"q","action":"create"}`)
	for _, j := range []string{"j1", "j2", "j3"} {
		w.ok("job.submit", submit(j, "q"))
	}
	w.refused("job.assign", `{"job_id":"j1","worker_id":"w1"}`, sdk.KindRule, `worker "w1" does not exist`)
	w.refused("worker.update", `{"worker_id":"w1","capacity":2}`, sdk.KindRule, "has not joined")
	w.ok("worker.join", `{"worker_id":"w1","capacity":1,"labels":["gpu"]}`)
	w.refused("worker.join", `{"worker_id":"w1","capacity":1}`, sdk.KindRule, "already joined")

	w.ok("job.assign", `{"job_id":"j1","worker_id":"w1"}`)
	if j, x := w.job("j1"), w.worker("w1"); j.State != handler.Dispatched || j.Worker != "w1" || !reflect.DeepEqual(x.Running, []string{"j1"}) {
		t.Fatalf("after assign: job %+v worker %+v", j, x)
	}
	w.refused("job.assign", `{"job_id":"j1","worker_id":"w1"}`, sdk.KindRule, "only a PENDING job")
	w.refused("job.assign", `{"job_id":"j2","worker_id":"w1"}`, sdk.KindRule, "full: 1 running, capacity 1")
	w.ok("worker.update", `{"worker_id":"w1","capacity":3}`)
	w.ok("job.assign", `{"job_id":"j2","worker_id":"w1"}`)

	// State reports with sequences.
	w.ok("job.state_report", `{"report_id":"r1","job_id":"j1","state":"RUNNING","seq":1,"worker_id":"w1"}`)
	if j := w.job("j1"); j.State != handler.Running || j.Seq != 1 {
		t.Fatalf("running job %+v", j)
	}
	w.noop("job.state_report", `{"report_id":"r1b","job_id":"j1","state":"RUNNING","seq":1,"worker_id":"w1"}`)
	w.ok("job.state_report", `{"report_id":"r2","job_id":"j1","state":"COMPLETED","seq":2,"worker_id":"w1","exit_code":0}`)
	if j, x := w.job("j1"), w.worker("w1"); j.State != handler.Completed || j.Worker != "" || *j.ExitCode != 0 || !reflect.DeepEqual(x.Running, []string{"j2"}) {
		t.Fatalf("after completion: job %+v worker %+v", j, x)
	}
	w.noop("job.state_report", `{"report_id":"r3","job_id":"j1","state":"RUNNING","seq":3,"worker_id":"w1"}`)
	w.refused("job.state_report", `{"report_id":"r4","job_id":"nope","state":"RUNNING","seq":1,"worker_id":"w1"}`, sdk.KindRule, "does not exist")
	w.refused("job.control", `{"job_id":"j1","action":"hold"}`, sdk.KindRule, "only a PENDING job")

	// Usage and pending reasons keep the newest report.
	w.ok("worker.usage", `{"report_id":"u5","worker_id":"w1","seq":5,"cpu_millis":250,"mem_bytes":1024}`)
	w.noop("worker.usage", `{"report_id":"u4","worker_id":"w1","seq":4,"cpu_millis":1,"mem_bytes":1}`)
	if x := w.worker("w1"); x.Usage == nil || x.Usage.CPUMillis != 250 || x.Usage.Seq != 5 {
		t.Fatalf("usage %+v", x.Usage)
	}
	w.refused("worker.usage", `{"report_id":"u6","worker_id":"w9","seq":1,"cpu_millis":1,"mem_bytes":1}`, sdk.KindRule, "has not joined")
	w.ok("job.pending_reason", `{"report_id":"p1","job_id":"j3","reason":"no worker with a gpu","seq":1}`)
	w.noop("job.pending_reason", `{"report_id":"p0","job_id":"j3","reason":"older","seq":1}`)
	w.noop("job.pending_reason", `{"report_id":"p2","job_id":"j1","reason":"finished jobs do not wait","seq":9}`)
	if j := w.job("j3"); j.PendingReason != "no worker with a gpu" {
		t.Fatalf("pending reason %+v", j)
	}

	// Hold stops dispatch; a paused queue stops dispatch too.
	w.ok("job.control", `{"job_id":"j3","action":"hold"}`)
	w.refused("job.assign", `{"job_id":"j3","worker_id":"w1"}`, sdk.KindRule, "only a PENDING job")
	w.ok("job.control", `{"job_id":"j3","action":"release"}`)
	w.ok("queue.control", `{"queue":"q","action":"pause"}`)
	w.refused("job.assign", `{"job_id":"j3","worker_id":"w1"}`, sdk.KindRule, "PAUSED")
	w.ok("queue.control", `{"queue":"q","action":"resume"}`)

	// Draining and removal.
	w.ok("worker.control", `{"worker_id":"w1","action":"drain"}`)
	w.refused("job.assign", `{"job_id":"j3","worker_id":"w1"}`, sdk.KindRule, "only to READY workers")
	w.refused("worker.control", `{"worker_id":"w1","action":"remove"}`, sdk.KindRule, "still runs 1 job")
	w.refused("worker.control", `{"worker_id":"w1","action":"drain"}`, sdk.KindRule, "only a READY worker")
	w.ok("worker.control", `{"worker_id":"w1","action":"undrain"}`)

	// Cancelling a dispatched job frees the worker's slot (the worker
	// document is fetched through NeedKeys).
	w.ok("job.control", `{"job_id":"j2","action":"cancel"}`)
	if x := w.worker("w1"); len(x.Running) != 0 {
		t.Fatalf("cancelled job still on worker: %+v", x)
	}
	w.ok("worker.control", `{"worker_id":"w1","action":"remove"}`)
	w.refused("worker.join", `{"worker_id":"w1","capacity":1}`, sdk.KindRule, "was removed")
}

func TestWorkerDeathRequeuesItsJobs_FakeStore(t *testing.T) {
	w := newWorld(t)
	w.ok("queue.control", `{"queue":"q","action":"create"}`)
	w.ok("worker.join", `{"worker_id":"w1","capacity":4}`)
	for _, j := range []string{"j1", "j2", "j3"} {
		w.ok("job.submit", submit(j, "q"))
		w.ok("job.assign", fmt.Sprintf(`{"job_id":%q,"worker_id":"w1"}`, j))
	}
	w.ok("job.state_report", `{"report_id":"r1","job_id":"j1","state":"RUNNING","seq":1,"worker_id":"w1"}`)
	w.ok("job.state_report", `{"report_id":"r2","job_id":"j3","state":"RUNNING","seq":1,"worker_id":"w1"}`)
	w.ok("job.state_report", `{"report_id":"r3","job_id":"j3","state":"FAILED","seq":2,"worker_id":"w1","exit_code":2}`)

	r := w.ok("worker.death", `{"report_id":"d1","worker_id":"w1","detected_by":"ctl-1"}`)
	var got []string
	for _, tr := range r.Transitions {
		got = append(got, tr.Machine+"/"+tr.Key+"→"+tr.To)
	}
	if want := []string{"job/j1→PENDING", "job/j2→PENDING"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("transitions %v, want %v", got, want)
	}
	for _, id := range []string{"j1", "j2"} {
		if j := w.job(id); j.State != handler.Pending || j.Worker != "" || j.Requeues != 1 || w.machine("job", id) != handler.Pending {
			t.Fatalf("requeued job %+v", j)
		}
	}
	if j := w.job("j3"); j.State != handler.Failed {
		t.Fatalf("finished job was touched: %+v", j)
	}
	if x := w.worker("w1"); x.State != handler.Dead || len(x.Running) != 0 || x.Deaths != 1 || x.DetectedBy != "ctl-1" {
		t.Fatalf("dead worker %+v", x)
	}
	w.noop("worker.death", `{"report_id":"d2","worker_id":"w1","detected_by":"ctl-2"}`)
	// A late report from the dead worker is refused: the job was taken from it.
	w.refused("job.state_report", `{"report_id":"late","job_id":"j1","state":"COMPLETED","seq":7,"worker_id":"w1"}`, sdk.KindRule, `held by no worker`)
	w.refused("job.assign", `{"job_id":"j1","worker_id":"w1"}`, sdk.KindRule, "DEAD")
	w.refused("worker.update", `{"worker_id":"w1","capacity":2}`, sdk.KindRule, "must join again")
	// A dead worker may come back.
	w.ok("worker.join", `{"worker_id":"w1","capacity":2}`)
	w.ok("worker.join", `{"worker_id":"w2","capacity":2}`)
	w.ok("job.assign", `{"job_id":"j1","worker_id":"w2"}`)
	// The new worker numbers its reports from 1 again; the old one is refused.
	w.refused("job.state_report", `{"report_id":"old","job_id":"j1","state":"RUNNING","seq":9,"worker_id":"w1"}`, sdk.KindRule, `held by worker "w2"`)
	w.ok("job.state_report", `{"report_id":"new","job_id":"j1","state":"RUNNING","seq":1,"worker_id":"w2"}`)
	if j := w.job("j1"); j.State != handler.Running || j.Worker != "w2" || j.Seq != 1 {
		t.Fatalf("re-dispatched job %+v", j)
	}
}

func TestDeterministic(t *testing.T) {
	h := sdktest.New(t, handler.Plugin())
	state := []kv.Record{
		sdktest.Doc(t, "worker/w1", 3, handler.Worker{WorkerID: "w1", Capacity: 2, State: "READY", Running: []string{"j1"}}),
		sdktest.Doc(t, "job/j1", 4, handler.Job{JobID: "j1", Queue: "q", State: "RUNNING", Worker: "w1"}),
		sdktest.Machine("worker", "w1", "READY", 0, 3),
	}
	a := h.Eval("worker.death", "d", `{"report_id":"d1","worker_id":"w1","detected_by":"c"}`, state...)
	for i := 0; i < 20; i++ {
		b := h.Eval("worker.death", "d", `{"report_id":"d1","worker_id":"w1","detected_by":"c"}`, state...)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("same input, different effect:\n%+v\n%+v", a, b)
		}
	}
	if w, ok := sdktest.Written(a, "job/j1"); !ok || w.IfRev != 4 || !bytes.Contains(w.Value, []byte(`"PENDING"`)) {
		t.Fatalf("requeue write %+v", w)
	}
}
