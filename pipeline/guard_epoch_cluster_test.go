package pipeline_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/plugins/host"
)

// buildJobsPluginProcess builds the real writ-jobs plugin binary and
// starts it under a plugin host (a real go-plugin process).
func buildJobsPluginProcess(t *testing.T) *host.Host {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "writ-jobs")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/writ-dev/writ/examples/jobs/cmd/writ-jobs").CombinedOutput(); err != nil {
		t.Fatalf("go build writ-jobs: %v\n%s", err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	h, err := host.New(host.Config{Catalog: jobsgen.Catalog(), LogOutput: io.Discard,
		Plugins: []host.PluginConfig{{Path: bin, SHA256: hex.EncodeToString(sum[:])}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// TestRequeuedJobNewWorkerReports_RealCluster is issue 13 defect 3 on real
// components: a 3-node raftstore cluster (etcd raft, WAL, transport on
// 127.0.11.1–3), a real pipeline per node and the real jobs handler plugin
// process. k1 is dispatched to wa, wa reports RUNNING seq 5 and dies, k1 is
// dispatched to wb, whose reports number from 1 again: RUNNING seq 1 and
// COMPLETED seq 2 must apply on every replica (they were stale, and k1 stuck
// DISPATCHED, when the order was never reset), and a late report of wa is
// quarantined instead of moving the job.
func TestRequeuedJobNewWorkerReports_RealCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("real raft cluster and plugin process: skipped with -short")
	}
	h := buildJobsPluginProcess(t)
	c := newRaftClusterEval(t, "127.0.11.%d", h)
	lead := c.leader(10 * time.Second)
	p := c.nodes[lead].p
	ctx := context.Background()
	must := func(typ, id, payload string) {
		t.Helper()
		if o := submit(p, typ, id, payload); o.Status != pipeline.StatusCommitted {
			t.Fatalf("%s %s: %s", typ, id, o)
		}
	}
	deliver := func(typ, payload string) {
		t.Helper()
		if a := p.Deliver(ctx, pipeline.Entry{Type: typ, Payload: []byte(payload)}); !a.Received {
			t.Fatalf("%s: %+v", typ, a)
		}
	}
	report := func(typ, payload string) {
		t.Helper()
		if a := p.Report(ctx, pipeline.Entry{Type: typ, Payload: []byte(payload)}); !a.Received {
			t.Fatalf("%s: %+v", typ, a)
		}
	}
	// job waits until every node's machine record and job document say
	// state (order 0: no order recorded).
	job := func(state string, order uint64) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			ok := true
			var last string
			for _, n := range c.nodes {
				rec, found, err := n.node.Get(ctx, "_m/job/k1", false)
				doc, dfound, derr := n.node.Get(ctx, "job/k1", false)
				if err != nil || derr != nil || !found || !dfound {
					ok = false
					continue
				}
				mr, err := pipeline.ParseMachineRecord(rec.Value)
				var d struct {
					State string `json:"state"`
				}
				_ = json.Unmarshal(doc.Value, &d)
				last = string(rec.Value) + " " + string(doc.Value)
				if err != nil || mr.State != state || mr.Order != order || d.State != state {
					ok = false
				}
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("k1: want %s (order %d) in the machine record and the job document on every node; have %s", state, order, last)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	must("queue.control", "q1", `{"queue":"q1","action":"create"}`)
	must("job.submit", "s1", `{"job_id":"k1","queue":"q1","priority":1,"command":"run"}`)
	must("worker.join", "wa", `{"worker_id":"wa","capacity":2}`)
	must("worker.join", "wb", `{"worker_id":"wb","capacity":2}`)
	deliver("job.dispatch", `{"dispatch_id":"d1","scheduler":"s","items":[{"job_id":"k1","worker_id":"wa"}]}`)
	job("DISPATCHED", 0)
	report("job.state_report", `{"report_id":"ra5","job_id":"k1","state":"RUNNING","seq":5,"worker_id":"wa"}`)
	job("RUNNING", 5)
	report("worker.death", `{"report_id":"dead-wa","worker_id":"wa","detected_by":"ctl"}`)
	job("PENDING", 5)
	deliver("job.dispatch", `{"dispatch_id":"d2","scheduler":"s","items":[{"job_id":"k1","worker_id":"wb"}]}`)
	job("DISPATCHED", 0)
	// the dead worker's late report, numbered after its last one
	report("job.state_report", `{"report_id":"ra6","job_id":"k1","state":"RUNNING","seq":6,"worker_id":"wa"}`)
	deadline := time.Now().Add(15 * time.Second)
	for {
		cases, err := p.Conflicts(ctx)
		if err == nil && len(cases) == 1 && cases[0].Instance == "k1" && cases[0].Open {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("late report of wa: conflict cases %+v %v, want one open case for k1", cases, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	job("DISPATCHED", 0)
	report("job.state_report", `{"report_id":"rb1","job_id":"k1","state":"RUNNING","seq":1,"worker_id":"wb"}`)
	job("RUNNING", 1)
	report("job.state_report", `{"report_id":"rb2","job_id":"k1","state":"COMPLETED","seq":2,"worker_id":"wb"}`)
	job("COMPLETED", 2)
}
