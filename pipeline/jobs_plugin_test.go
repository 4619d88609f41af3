package pipeline_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/plugins/host"
	"github.com/writ-dev/writ/raftstore"
)

// Loopback address for the jobs plugin tests: 127.0.12.1, kernel-chosen port.

// jobsPluginNode is one real node: the writ-jobs plugin process behind
// plugins/host, a pipeline, and a single-voter raftstore (etcd raft, WAL,
// bbolt) on loopback.
type jobsPluginNode struct {
	t    *testing.T
	p    *pipeline.Pipeline
	node *raftstore.Node
}

func startJobsPluginNode(t *testing.T) *jobsPluginNode {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "writ-jobs")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/writ-dev/writ/examples/jobs/cmd/writ-jobs").CombinedOutput(); err != nil {
		t.Fatalf("go build writ-jobs: %v\n%s", err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	h, err := host.New(host.Config{Catalog: jobsgen.Catalog(), Plugins: []host.PluginConfig{{Path: bin, SHA256: hex.EncodeToString(sum[:])}}, LogOutput: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	p, err := pipeline.New(pipeline.Config{NodeID: "n1", Catalog: jobsgen.Catalog(), Evaluator: h, DataDir: filepath.Join(dir, "pipeline"),
		CommitTimeout: 10 * time.Second, RetryMin: 10 * time.Millisecond, RetryMax: 200 * time.Millisecond, TickInterval: 5 * time.Millisecond,
		Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.12.1:0")
	if err != nil {
		t.Fatal(err)
	}
	node, err := raftstore.Start(raftstore.Config{NodeID: "n1", DataDir: filepath.Join(dir, "raft"), RaftAddr: l.Addr().String(), Listener: l,
		Peers: []raftstore.Peer{{ID: "n1", Addr: l.Addr().String()}}, Checker: p.Checker(), Observer: p, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	p.SetLog(node)
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(); node.Stop(); <-node.Done() })
	for deadline := time.Now().Add(10 * time.Second); !node.IsLeader(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no leader")
		}
	}
	return &jobsPluginNode{t: t, p: p, node: node}
}

func (n *jobsPluginNode) request(typ, id, payload string) {
	n.t.Helper()
	if o := n.p.Submit(context.Background(), pipeline.Entry{Type: typ, ID: id, Payload: []byte(payload)}); o.Status != pipeline.StatusCommitted {
		n.t.Fatalf("%s %s: %s", typ, id, o)
	}
}

// fact reports a fact and waits until the outbox no longer holds it.
func (n *jobsPluginNode) fact(typ, payload string) {
	n.t.Helper()
	if a := n.p.Report(context.Background(), pipeline.Entry{Type: typ, Payload: []byte(payload)}); !a.Received {
		n.t.Fatalf("%s: %+v", typ, a)
	}
	for deadline := time.Now().Add(10 * time.Second); n.p.Outbox().Depth != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			n.t.Fatalf("%s %s: still in the outbox: %+v", typ, payload, n.p.Outbox())
		}
	}
}

func (n *jobsPluginNode) get(key string) string {
	n.t.Helper()
	rec, _, err := n.node.Get(context.Background(), key, false)
	if err != nil {
		n.t.Fatal(err)
	}
	return string(rec.Value)
}

// jobDoc is the part of the job document the test reads.
type jobDoc struct {
	State  string `json:"state"`
	Worker string `json:"worker"`
}

func (n *jobsPluginNode) job(id string) jobDoc {
	n.t.Helper()
	var j jobDoc
	if err := json.Unmarshal([]byte(n.get("job/"+id)), &j); err != nil {
		n.t.Fatalf("job/%s: %v", id, err)
	}
	return j
}

// TestWrongWorkerReportIsOneDecision_JobsPlugin (issue 13, defect 4): a
// worker that does not hold a job reports it COMPLETED. The job document
// and the job's machine record must agree afterwards: neither moves, the
// report is quarantined (a conflict case, retained in the log), and the
// holder can still finish or the operator cancel it. Over the real writ-jobs
// plugin process and a real raftstore node.
func TestWrongWorkerReportIsOneDecision_JobsPlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the plugin process")
	}
	n := startJobsPluginNode(t)
	n.request("queue.control", "q1", `{"queue":"q1","action":"create"}`)
	n.request("job.submit", "s22", `{"job_id":"j22","queue":"q1","priority":1,"command":"x"}`)
	n.request("worker.join", "w1", `{"worker_id":"w1","capacity":2}`)
	n.request("worker.join", "w2", `{"worker_id":"w2","capacity":2}`)
	n.request("job.assign", "a22", `{"job_id":"j22","worker_id":"w2"}`)
	n.fact("job.state_report", `{"report_id":"r1","job_id":"j22","state":"RUNNING","seq":1,"worker_id":"w2"}`)
	if m, j := n.get("_m/job/j22"), n.job("j22"); m != `{"state":"RUNNING","scope":"w2","order":1}` || j.State != "RUNNING" || j.Worker != "w2" {
		t.Fatalf("after w2 RUNNING: machine %s, document %+v", m, j)
	}

	// w1 never held j22.
	n.fact("job.state_report", `{"report_id":"r2","job_id":"j22","state":"COMPLETED","seq":2,"worker_id":"w1"}`)
	m, j := n.get("_m/job/j22"), n.job("j22")
	if m != `{"state":"RUNNING","scope":"w2","order":1}` || j.State != "RUNNING" || j.Worker != "w2" {
		t.Fatalf("a report from a worker that does not hold the job moved it: machine %s, document %+v (they must stay RUNNING on w2 together)", m, j)
	}
	cs, err := n.p.Conflicts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Machine != "job" || cs[0].Instance != "j22" || !cs[0].Open || cs[0].Current != "RUNNING" || cs[0].Incoming != "COMPLETED" ||
		!strings.Contains(cs[0].Reason, `"w1"`) {
		t.Fatalf("the refused report was not quarantined with its reason: %+v", cs)
	}
	if h, open, _ := n.p.Health(context.Background()); h != pipeline.HealthDegraded || open != 1 {
		t.Fatalf("health %s open=%d, want degraded with one case", h, open)
	}

	// The job is still w2's: cancel works, and w2's slot is freed.
	n.request("job.control", "c22", `{"job_id":"j22","action":"cancel"}`)
	if m, j := n.get("_m/job/j22"), n.job("j22"); m != `{"state":"CANCELLED","scope":"w2","order":1}` || j.State != "CANCELLED" {
		t.Fatalf("after cancel: machine %s, document %+v", m, j)
	}
	var w struct {
		Running []string `json:"running"`
	}
	if err := json.Unmarshal([]byte(n.get("worker/w2")), &w); err != nil || len(w.Running) != 0 || !strings.Contains(n.get("worker/w2"), `"running":[]`) {
		t.Fatalf("worker/w2 after cancel: %s (%v)", n.get("worker/w2"), err)
	}
}
