package pipeline_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/pipeline/pipelinetest"
	"github.com/writ-dev/writ/raftstore"
)

// Loopback addresses for pipeline cluster tests: 127.0.4.1–127.0.4.3 and
// 127.0.7.1–127.0.7.3, kernel-chosen ports.

type rnode struct {
	cfg     raftstore.Config
	node    *raftstore.Node
	p       *pipeline.Pipeline
	outbox  string
	mu      sync.Mutex
	reloads []string
}

type rcluster struct {
	t     testing.TB
	nodes []*rnode
	eval  *pipelinetest.FakeEvaluator
	// observe, if set, wraps the pipeline as the log's observer.
	observe func(n *rnode, p *pipeline.Pipeline) kv.ApplyObserver
	// evaluator, when set, is used instead of eval (a real handler).
	evaluator pipeline.Evaluator
	// commitTimeout, when set, replaces the nodes' 10s commit timeout.
	commitTimeout time.Duration
	// maxBatchBytes, when set, replaces the pipelines' MaxBatchBytes.
	maxBatchBytes int
}

func newRaftCluster(t testing.TB) *rcluster { return newRaftClusterOn(t, "127.0.4.%d") }

// newRaftClusterOn starts three nodes on the loopback addresses hostFmt
// names for 1..3.
func newRaftClusterOn(t testing.TB, hostFmt string) *rcluster {
	return newRaftClusterWith(t, hostFmt, nil, nil)
}

// newRaftClusterEval is newRaftClusterOn with the nodes evaluating through
// ev (nil: the fake evaluator).
func newRaftClusterEval(t testing.TB, hostFmt string, ev pipeline.Evaluator) *rcluster {
	return newRaftClusterOpts(t, hostFmt, nil, nil, ev)
}

// newRaftClusterWith is newRaftClusterOn with each node's raftstore
// configuration adjusted by tweak and its observer wrapped by observe
// (either may be nil).
func newRaftClusterWith(t testing.TB, hostFmt string, tweak func(*raftstore.Config), observe func(*rnode, *pipeline.Pipeline) kv.ApplyObserver) *rcluster {
	return newRaftClusterOpts(t, hostFmt, tweak, observe, nil)
}

// newRaftClusterOpts starts the cluster with every option: tweak and observe
// as in newRaftClusterWith, ev as in newRaftClusterEval (each may be nil).
func newRaftClusterOpts(t testing.TB, hostFmt string, tweak func(*raftstore.Config), observe func(*rnode, *pipeline.Pipeline) kv.ApplyObserver, ev pipeline.Evaluator) *rcluster {
	return startRaftCluster(t, hostFmt, tweak, &rcluster{t: t, eval: pipelinetest.NewFakeEvaluator(), observe: observe, evaluator: ev})
}

// startRaftCluster starts c's three nodes (see newRaftClusterOpts).
func startRaftCluster(t testing.TB, hostFmt string, tweak func(*raftstore.Config), c *rcluster) *rcluster {
	root := t.TempDir()
	var peers []raftstore.Peer
	var lis []net.Listener
	for i := 0; i < 3; i++ {
		l, err := net.Listen("tcp", fmt.Sprintf(hostFmt, i+1)+":0")
		if err != nil {
			t.Fatal(err)
		}
		lis = append(lis, l)
		peers = append(peers, raftstore.Peer{ID: fmt.Sprintf("n%d", i+1), Addr: l.Addr().String()})
	}
	for i := 0; i < 3; i++ {
		n := &rnode{outbox: filepath.Join(root, peers[i].ID, "pipeline")}
		n.cfg = raftstore.Config{NodeID: peers[i].ID, DataDir: filepath.Join(root, peers[i].ID, "raft"), RaftAddr: peers[i].Addr,
			Listener: lis[i], Peers: peers, Logger: quiet()}
		if tweak != nil {
			tweak(&n.cfg)
		}
		c.nodes = append(c.nodes, n)
		c.start(i)
	}
	t.Cleanup(func() {
		for i := range c.nodes {
			c.stop(i)
		}
	})
	return c
}

func (c *rcluster) start(i int) {
	c.t.Helper()
	n := c.nodes[i]
	var ev pipeline.Evaluator = c.eval
	if c.evaluator != nil {
		ev = c.evaluator
	}
	commitTimeout := 10 * time.Second
	if c.commitTimeout != 0 {
		commitTimeout = c.commitTimeout
	}
	p, err := pipeline.New(pipeline.Config{NodeID: n.cfg.NodeID, Catalog: jobsgen.Catalog(), Evaluator: ev, DataDir: n.outbox,
		CommitTimeout: commitTimeout, ConfigTimeout: 10 * time.Second, RetryMin: 10 * time.Millisecond, RetryMax: 200 * time.Millisecond,
		TickInterval: 5 * time.Millisecond, Logger: quiet(), MaxBatchBytes: c.maxBatchBytes,
		OnConfigActivated: func(a pipeline.ConfigActivation) { n.mu.Lock(); n.reloads = append(n.reloads, a.ID); n.mu.Unlock() }})
	if err != nil {
		c.t.Fatal(err)
	}
	cfg := n.cfg
	cfg.Checker, cfg.Observer = p.Checker(), p
	if c.observe != nil {
		cfg.Observer = c.observe(n, p)
	}
	var node *raftstore.Node
	for try := 0; try < 50; try++ {
		node, err = raftstore.Start(cfg)
		if err == nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		c.t.Fatalf("start %s: %v", cfg.NodeID, err)
	}
	n.cfg.Listener, n.cfg.RaftAddr = nil, node.Addr()
	p.SetLog(node)
	if err := p.Start(context.Background()); err != nil {
		c.t.Fatal(err)
	}
	n.node, n.p = node, p
}

func (c *rcluster) stop(i int) {
	n := c.nodes[i]
	if n.p != nil {
		n.p.Stop()
		n.p = nil
	}
	if n.node != nil {
		n.node.Stop()
		<-n.node.Done()
		n.node = nil
	}
}

func (c *rcluster) leader(timeout time.Duration) int {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for i, n := range c.nodes {
			if n.node != nil && n.node.IsLeader() {
				return i
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatal("no leader")
	return -1
}

// eventually waits until every live node's applied state has key = value.
func (c *rcluster) eventually(key, value string) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok := true
		var got []string
		for _, n := range c.nodes {
			if n.node == nil {
				continue
			}
			rec, found, err := n.node.Get(context.Background(), key, false)
			if err != nil || !found || string(rec.Value) != value {
				ok = false
			}
			got = append(got, string(rec.Value))
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: want %s on every node, have %q", key, value, got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func submit(p *pipeline.Pipeline, typ, id, payload string) pipeline.Outcome {
	return p.Submit(context.Background(), pipeline.Entry{Type: typ, ID: id, Payload: []byte(payload)})
}

// TestRaftCluster3_FakeEvaluator runs the invariants over a real 3-node
// raftstore cluster (etcd raft, WAL, gRPC transport on 127.0.4.x), one real
// pipeline per node, with a fake domain handler: requests commit from any
// node (W1), facts are accepted without quorum and committed after it
// returns without resending (W3), a receipt's items commit through their own
// class (W4), a configuration activates everywhere (W5), the guard runs on
// every replica (W8: same conflict case everywhere), and replicas agree.
func TestRaftCluster3_FakeEvaluator(t *testing.T) {
	if testing.Short() {
		t.Skip("real cluster")
	}
	c := newRaftCluster(t)
	lead := c.leader(10 * time.Second)
	fol := (lead + 1) % 3
	// A follower learns the leader from its first append; until then a
	// submit there is (truthfully) UNAVAILABLE, which is not what this
	// step is about.
	for deadline := time.Now().Add(10 * time.Second); c.nodes[fol].node.Status().LeaderID == ""; {
		if time.Now().After(deadline) {
			t.Fatal("follower never learned the leader")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// W1: COMMITTED from the leader and from a follower.
	if o := submit(c.nodes[lead].p, "job.submit", "r1", `{"job_id":"j1","queue":"q","priority":1,"command":"x"}`); o.Status != pipeline.StatusCommitted {
		t.Fatalf("leader submit: %s", o)
	}
	if o := submit(c.nodes[fol].p, "job.submit", "r2", `{"job_id":"j2","queue":"q","priority":1,"command":"x"}`); o.Status != pipeline.StatusCommitted {
		t.Fatalf("follower submit: %s", o)
	}
	// W9: a retry with the same ID on another node is answered from the
	// first application.
	if o := submit(c.nodes[(lead+2)%3].p, "job.submit", "r1", `{"job_id":"j1","queue":"q","priority":1,"command":"x"}`); o.Status != pipeline.StatusCommitted || !o.Duplicate {
		t.Fatalf("retry: %s", o)
	}
	c.eventually("_m/job/j1", `{"state":"PENDING"}`)

	// W4: a receipt on a follower; items commit through their own class.
	a := c.nodes[fol].p.Deliver(context.Background(), pipeline.Entry{Type: "job.dispatch",
		Payload: []byte(`{"dispatch_id":"d1","scheduler":"s","items":[{"job_id":"j1","worker_id":"w1"},{"job_id":"j2","worker_id":"w2"}]}`)})
	if !a.Received || len(a.ItemIDs) != 2 {
		t.Fatalf("deliver: %+v", a)
	}
	c.eventually("_m/job/j1", `{"state":"DISPATCHED","scope":"w1"}`)
	c.eventually("_m/job/j2", `{"state":"DISPATCHED","scope":"w2"}`)

	// W8 on every replica: completion, then a terminal regression.
	report := func(i int, id, job, state string, seq int) {
		t.Helper()
		// the job's own worker reports (j1 runs on w1, j2 on w2)
		a := c.nodes[i].p.Report(context.Background(), pipeline.Entry{Type: "job.state_report",
			Payload: []byte(fmt.Sprintf(`{"report_id":"%s","job_id":"%s","state":"%s","seq":%d,"worker_id":"w%s"}`, id, job, state, seq, strings.TrimPrefix(job, "j")))})
		if !a.Received {
			t.Fatalf("report %s: %+v", id, a)
		}
	}
	report(fol, "f1", "j1", "COMPLETED", 2)
	c.eventually("_m/job/j1", `{"state":"COMPLETED","scope":"w1","order":2}`)
	report(lead, "f2", "j1", "RUNNING", 3)
	deadline := time.Now().Add(10 * time.Second)
	for _, n := range c.nodes {
		for {
			h, open, err := n.p.Health(context.Background())
			if err == nil && h == pipeline.HealthDegraded && open == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: health %s open=%d err=%v", n.cfg.NodeID, h, open, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	c.eventually("_m/job/j1", `{"state":"COMPLETED","scope":"w1","order":2}`)

	// W5: a configuration change activates and every node reloads.
	doc := `{"version":"2","settings":{"commit_timeout":"5s","max_batch":64,"log_level":"info"}}`
	if o := c.nodes[lead].p.ConfigUpgrade(context.Background(), pipeline.Entry{Type: "cluster.config", ID: "v2", Payload: []byte(doc)}); o.Status != pipeline.StatusCommitted {
		t.Fatalf("config: %s", o)
	}
	for _, n := range c.nodes {
		for {
			n.mu.Lock()
			ok := len(n.reloads) == 1 && n.reloads[0] == "v2"
			n.mu.Unlock()
			if ok {
				break
			}
			if time.Now().After(deadline.Add(5 * time.Second)) {
				t.Fatalf("%s did not reload", n.cfg.NodeID)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// W2 + W3 under quorum loss: keep one node, stop the other two.
	keep := fol
	for i := range c.nodes {
		if i != keep {
			c.stop(i)
		}
	}
	report(keep, "f3", "j2", "RUNNING", 1)
	qctx, qcancel := context.WithTimeout(context.Background(), 2*time.Second)
	o := c.nodes[keep].p.Submit(qctx, pipeline.Entry{Type: "job.submit", ID: "r3", Payload: []byte(`{"job_id":"j3","queue":"q","priority":1,"command":"x"}`)})
	qcancel()
	if o.Status == pipeline.StatusCommitted || o.Status == pipeline.StatusRejected {
		t.Fatalf("request without quorum: %s", o)
	}
	if d := c.nodes[keep].p.Outbox().Depth; d != 1 {
		t.Fatalf("outbox depth without quorum = %d, want 1", d)
	}
	// restart the receiving node too: the fact is reloaded from its outbox
	c.stop(keep)
	c.start(keep)
	for i := range c.nodes {
		if i != keep {
			c.start(i)
		}
	}
	c.leader(10 * time.Second)
	c.eventually("_m/job/j2", `{"state":"RUNNING","scope":"w2","order":1}`)
	drainBy := time.Now().Add(10 * time.Second)
	for c.nodes[keep].p.Outbox().Depth != 0 {
		if time.Now().After(drainBy) {
			t.Fatal("outbox not drained")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// an UNCERTAIN request may have committed after quorum returned; its
	// outcome is queryable and a retry with the same ID is safe.
	o2 := submit(c.nodes[keep].p, "job.submit", "r3", `{"job_id":"j3","queue":"q","priority":1,"command":"x"}`)
	if o2.Status != pipeline.StatusCommitted {
		t.Fatalf("retry of %s after heal: %s", o, o2)
	}
	c.eventually("_m/job/j3", `{"state":"PENDING"}`)
	// replicas agree on the whole state at the same applied index
	agreeBy := time.Now().Add(10 * time.Second)
	for {
		var hashes []string
		for _, n := range c.nodes {
			idx, h, err := n.node.StateHash()
			if err != nil {
				t.Fatal(err)
			}
			hashes = append(hashes, fmt.Sprintf("%d:%x", idx, h))
		}
		if hashes[0] == hashes[1] && hashes[1] == hashes[2] {
			break
		}
		if time.Now().After(agreeBy) {
			t.Fatalf("replicas disagree: %v", hashes)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
