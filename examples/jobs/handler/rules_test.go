package handler_test

import (
	"strings"
	"testing"

	"github.com/writ-dev/writ/examples/jobs/handler"
	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/plugins/sdk"
	"github.com/writ-dev/writ/plugins/sdk/sdktest"
)

// TestRulesTable evaluates one entry against explicit state per case: the
// domain rule that must refuse it, or the documents it must write (with
// revision preconditions taken from the given state).
func TestRulesTable(t *testing.T) {
	h := sdktest.New(t, handler.Plugin())
	queue := func(state string, rev uint64) kv.Record {
		return sdktest.Doc(t, "queue/q", rev, handler.Queue{Name: "q", State: state})
	}
	job := func(state, worker string, rev uint64) kv.Record {
		return sdktest.Doc(t, "job/j", rev, handler.Job{JobID: "j", Queue: "q", State: state, Worker: worker})
	}
	worker := func(state string, capacity int64, running []string, rev uint64) kv.Record {
		return sdktest.Doc(t, "worker/w", rev, handler.Worker{WorkerID: "w", Capacity: capacity, State: state, Running: running})
	}
	const submit = `{"job_id":"j","queue":"q","priority":1,"command":"x"}`
	const assign = `{"job_id":"j","worker_id":"w"}`
	cases := []struct {
		name    string
		typ     string
		payload string
		state   []kv.Record
		rule    string            // substring of the expected rule error ("" = success)
		writes  map[string]uint64 // key → expected IfRev on success
	}{
		{"submit: queue missing", "job.submit", submit, []kv.Record{sdktest.Absent("job/j"), sdktest.Absent("queue/q")}, `queue "q" does not exist`, nil},
		{"submit: queue paused", "job.submit", submit, []kv.Record{sdktest.Absent("job/j"), queue("PAUSED", 3)}, "is PAUSED", nil},
		{"submit: queue draining", "job.submit", submit, []kv.Record{sdktest.Absent("job/j"), queue("DRAINING", 3)}, "is DRAINING", nil},
		{"submit: machine record wins over the mirror", "job.submit", submit, []kv.Record{sdktest.Absent("job/j"), queue("ACTIVE", 3), sdktest.Machine("queue", "q", "PAUSED", 0, 4)}, "is PAUSED", nil},
		{"submit: job exists", "job.submit", submit, []kv.Record{job("PENDING", "", 5), queue("ACTIVE", 3)}, "already exists", nil},
		{"submit: ok", "job.submit", submit, []kv.Record{sdktest.Absent("job/j"), queue("ACTIVE", 3)}, "", map[string]uint64{"job/j": 0}},
		{"cancel: finished", "job.control", `{"job_id":"j","action":"cancel"}`, []kv.Record{job("COMPLETED", "", 5)}, "cannot be cancelled", nil},
		{"cancel: running frees the worker", "job.control", `{"job_id":"j","action":"cancel"}`, []kv.Record{job("RUNNING", "w", 5), worker("READY", 2, []string{"j"}, 6)}, "", map[string]uint64{"job/j": 5, "worker/w": 6}},
		{"hold: running", "job.control", `{"job_id":"j","action":"hold"}`, []kv.Record{job("RUNNING", "w", 5)}, "only a PENDING job", nil},
		{"release: pending", "job.control", `{"job_id":"j","action":"release"}`, []kv.Record{job("PENDING", "", 5)}, "only a HELD job", nil},
		{"queue: create twice", "queue.control", `{"queue":"q","action":"create"}`, []kv.Record{queue("ACTIVE", 3)}, "already exists", nil},
		{"queue: pause a draining queue", "queue.control", `{"queue":"q","action":"pause"}`, []kv.Record{queue("DRAINING", 3)}, "resume it before pausing", nil},
		{"queue: drain", "queue.control", `{"queue":"q","action":"drain"}`, []kv.Record{queue("PAUSED", 3)}, "", map[string]uint64{"queue/q": 3}},
		{"join: already live", "worker.join", `{"worker_id":"w","capacity":2}`, []kv.Record{worker("DRAINING", 2, nil, 6)}, "already joined", nil},
		{"join: removed", "worker.join", `{"worker_id":"w","capacity":2}`, []kv.Record{worker("REMOVED", 2, nil, 6)}, "was removed", nil},
		{"join: back from the dead", "worker.join", `{"worker_id":"w","capacity":2}`, []kv.Record{worker("DEAD", 2, nil, 6)}, "", map[string]uint64{"worker/w": 6}},
		{"update: dead", "worker.update", `{"worker_id":"w","capacity":2}`, []kv.Record{worker("DEAD", 2, nil, 6)}, "must join again", nil},
		{"drain: draining", "worker.control", `{"worker_id":"w","action":"drain"}`, []kv.Record{worker("DRAINING", 2, nil, 6)}, "only a READY worker", nil},
		{"undrain: ready", "worker.control", `{"worker_id":"w","action":"undrain"}`, []kv.Record{worker("READY", 2, nil, 6)}, "only a DRAINING worker", nil},
		{"remove: busy", "worker.control", `{"worker_id":"w","action":"remove"}`, []kv.Record{worker("DRAINING", 2, []string{"a", "b"}, 6)}, "still runs 2 job(s)", nil},
		{"assign: job held", "job.assign", assign, []kv.Record{job("HELD", "", 5), worker("READY", 2, nil, 6)}, "only a PENDING job", nil},
		{"assign: worker draining", "job.assign", assign, []kv.Record{job("PENDING", "", 5), worker("DRAINING", 2, nil, 6)}, "only to READY workers", nil},
		{"assign: worker full", "job.assign", assign, []kv.Record{job("PENDING", "", 5), worker("READY", 2, []string{"a", "b"}, 6)}, "is full: 2 running, capacity 2", nil},
		{"assign: queue paused", "job.assign", assign, []kv.Record{job("PENDING", "", 5), worker("READY", 2, nil, 6), queue("PAUSED", 3)}, "is PAUSED", nil},
		{"assign: ok", "job.assign", assign, []kv.Record{job("PENDING", "", 5), worker("READY", 2, []string{"a"}, 6), queue("ACTIVE", 3)}, "", map[string]uint64{"job/j": 5, "worker/w": 6}},
		{"report: unknown job", "job.state_report", `{"report_id":"r","job_id":"j","state":"RUNNING","seq":1,"worker_id":"w"}`, []kv.Record{sdktest.Absent("job/j"), worker("READY", 2, nil, 6)}, "does not exist", nil},
		{"report: running", "job.state_report", `{"report_id":"r","job_id":"j","state":"RUNNING","seq":1,"worker_id":"w"}`, []kv.Record{job("DISPATCHED", "w", 5), worker("READY", 2, []string{"j"}, 6)}, "", map[string]uint64{"job/j": 5}},
		{"report: from a worker that does not hold the job", "job.state_report", `{"report_id":"r","job_id":"j","state":"COMPLETED","seq":2,"worker_id":"w"}`, []kv.Record{job("RUNNING", "w2", 5), worker("READY", 2, nil, 6)}, `held by worker "w2"`, nil},
		{"report: on a requeued job", "job.state_report", `{"report_id":"r","job_id":"j","state":"RUNNING","seq":2,"worker_id":"w"}`, []kv.Record{job("PENDING", "", 5), worker("DEAD", 2, nil, 6)}, "held by no worker", nil},
		{"usage: unknown worker", "worker.usage", `{"report_id":"u","worker_id":"w","seq":1,"cpu_millis":1,"mem_bytes":1}`, []kv.Record{sdktest.Absent("worker/w")}, "has not joined", nil},
		{"death: unknown worker", "worker.death", `{"report_id":"d","worker_id":"w","detected_by":"c"}`, []kv.Record{sdktest.Absent("worker/w")}, "has not joined", nil},
		{"death: idle worker", "worker.death", `{"report_id":"d","worker_id":"w","detected_by":"c"}`, []kv.Record{worker("READY", 2, []string{}, 6)}, "", map[string]uint64{"worker/w": 6}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := h.Eval(c.typ, "id", c.payload, c.state...)
			if len(r.NeedKeys) > 0 {
				t.Fatalf("asked for %v; the case must give every key", r.NeedKeys)
			}
			if c.rule != "" {
				if r.Err == nil || r.Err.Kind != sdk.KindRule || !strings.Contains(r.Err.Msg, c.rule) {
					t.Fatalf("want rule error containing %q, got %+v (err %v)", c.rule, r, r.Err)
				}
				return
			}
			if r.Err != nil {
				t.Fatalf("unexpected error %v", r.Err)
			}
			if len(r.Writes) != len(c.writes) {
				t.Fatalf("writes %s, want %v", sdktest.Keys(r), c.writes)
			}
			for key, rev := range c.writes {
				w, ok := sdktest.Written(r, key)
				if !ok || w.IfRev != rev {
					t.Errorf("write to %s: %+v, want IfRev %d", key, w, rev)
				}
			}
		})
	}
}
