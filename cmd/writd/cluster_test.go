package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/internal/proctest"
)

// TestCluster_KillLeaderUnderLoad: 3 real writd processes with their plugin
// processes; jobs are submitted by several clients while the leader is
// SIGKILLed and later restarted. Every COMMITTED job must be present on all
// nodes and the replicated state must be identical everywhere.
func TestCluster_KillLeaderUnderLoad(t *testing.T) {
	c := newCluster(t, "127.0.3.10", "127.0.3.11", "127.0.3.12")
	if _, err := submit(c.nodes[0], "queue.control", `{"queue":"q","action":"create"}`, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	committed := map[string]bool{}
	outcomes := map[string]int{}
	load := proctest.StartLoad(4, func(w, i int) {
		job := fmt.Sprintf("w%d-%d", w, i)
		p := c.nodes[(w+i)%len(c.nodes)]
		r, err := submit(p, "job.submit", fmt.Sprintf(`{"job_id":%q,"queue":"q","priority":1,"command":"x"}`, job), 2*time.Second)
		mu.Lock()
		if err == nil && r.Outcome == writv1.Outcome_COMMITTED {
			committed[job] = true
			outcomes["COMMITTED"]++
		} else if d, ok := api.OutcomeFromError(err); ok {
			outcomes[d.Outcome.String()]++
		} else {
			outcomes["transport"]++
		}
		mu.Unlock()
		if err != nil {
			time.Sleep(20 * time.Millisecond)
		}
	})
	time.Sleep(1500 * time.Millisecond)
	old := c.leader(10 * time.Second)
	t.Logf("SIGKILL leader %s", old.name)
	c.kill(old)
	nl := c.leader(15 * time.Second)
	if nl == old {
		t.Fatal("killed node still reported as leader")
	}
	t.Logf("new leader %s", nl.name)
	time.Sleep(1500 * time.Millisecond)
	c.start(old)
	c.waitReady(old, 40*time.Second)
	time.Sleep(1000 * time.Millisecond)
	load.Stop()
	mu.Lock()
	t.Logf("outcomes: %v", outcomes)
	n := len(committed)
	mu.Unlock()
	if n < 10 {
		t.Fatalf("only %d jobs committed: the load did not run", n)
	}
	h := c.converge(30 * time.Second)
	t.Logf("converged: %s", h)
	for _, p := range c.nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		l, err := p.client.List(ctx, &writv1.ListRequest{Prefix: "job/", Serializable: true})
		cancel()
		if err != nil {
			t.Fatalf("%s: list: %v", p.name, err)
		}
		have := map[string]bool{}
		for _, r := range l.Records {
			have[strings.TrimPrefix(r.Key, "job/")] = true
		}
		for job := range committed {
			if !have[job] {
				t.Errorf("%s: COMMITTED job %s missing", p.name, job)
			}
		}
	}
	// SIGTERM is a graceful leave: the node exits 0 and the leader removes
	// it from the raft configuration; the rest keep serving.
	var gone *proc
	for _, p := range c.nodes {
		if st, err := c.status(p); err == nil && !st.IsLeader {
			gone = p
			break
		}
	}
	_ = gone.signal(syscall.SIGTERM)
	select {
	case <-gone.exited():
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not exit on SIGTERM", gone.name)
	}
	if code := gone.exitCode(); code != 0 {
		t.Fatalf("%s exited %d on SIGTERM", gone.name, code)
	}
	var rest []*proc
	for _, p := range c.nodes {
		if p != gone {
			rest = append(rest, p)
		}
	}
	c.nodes = append(rest, gone)
	c.waitVoters(2, 20*time.Second)
	if _, err := submit(c.leader(10*time.Second), "job.submit", `{"job_id":"after-leave","queue":"q","priority":1,"command":"x"}`, 5*time.Second); err != nil {
		t.Fatalf("cluster does not serve after a graceful leave: %v", err)
	}
}

// TestCluster_QuorumLoss: with 2 of 3 nodes down, requests are never
// COMMITTED; facts reported to the survivor are acknowledged as received
// and, after the two nodes return, each is committed exactly once without
// being sent again.
func TestCluster_QuorumLoss(t *testing.T) {
	c := newCluster(t, "127.0.3.13", "127.0.3.14", "127.0.3.15")
	s := c.nodes[0]
	if _, err := submit(s, "worker.join", `{"worker_id":"w1","capacity":4}`, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	c.kill(c.nodes[1])
	c.kill(c.nodes[2])
	for i := 0; i < 3; i++ {
		r, err := submit(s, "worker.update", fmt.Sprintf(`{"worker_id":"w1","capacity":%d}`, 5+i), time.Second)
		if err == nil {
			t.Fatalf("request committed without quorum: %v", r)
		}
		d, ok := api.OutcomeFromError(err)
		if !ok || (d.Outcome != writv1.Outcome_UNAVAILABLE && d.Outcome != writv1.Outcome_UNCERTAIN) {
			t.Fatalf("request without quorum: %v (want UNAVAILABLE or UNCERTAIN)", err)
		}
	}
	const facts = 10
	for i := 1; i <= facts; i++ {
		r, err := report(s, "worker.usage", fmt.Sprintf(`{"report_id":"u%d","worker_id":"w1","seq":%d,"cpu_millis":%d,"mem_bytes":1024}`, i, i, i*10))
		if err != nil || !r.Received {
			t.Fatalf("fact %d not received without quorum: %v %v", i, r, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	ob, err := s.client.Outbox(ctx, &writv1.OutboxRequest{})
	cancel()
	if err != nil || ob.Depth != facts {
		t.Fatalf("outbox while quorum lost: %v %v (want %d facts)", ob, err, facts)
	}
	c.start(c.nodes[1])
	c.start(c.nodes[2])
	c.leader(30 * time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		ob, err = s.client.Outbox(ctx, &writv1.OutboxRequest{})
		cancel()
		if err == nil && ob.Depth == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("outbox not drained after quorum returned: %v %v", ob, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// every fact applied exactly once: one "applied" event per fact ID on
	// the watch stream, and its outcome recorded on every node.
	ctx, cancel = context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	ws, err := s.client.Watch(ctx, &writv1.WatchRequest{FromIndex: 1, Types: []string{"worker.usage"}})
	if err != nil {
		t.Fatal(err)
	}
	applied := map[string]int{}
	for {
		ev, err := ws.Recv()
		if err != nil {
			break
		}
		if ev.Status != "duplicate" {
			applied[ev.Id]++
		}
	}
	c.converge(30 * time.Second)
	for i := 1; i <= facts; i++ {
		id := fmt.Sprintf("fact:worker.usage:u%d", i)
		if applied[id] != 1 {
			t.Errorf("%s applied %d times (want exactly once)", id, applied[id])
		}
		for _, p := range c.nodes {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			o, err := p.client.Outcome(ctx, &writv1.OutcomeRequest{RequestId: id})
			cancel()
			if err != nil || !o.Known || o.Outcome != writv1.Outcome_COMMITTED {
				t.Errorf("%s: %s: %v %v", p.name, id, o, err)
			}
		}
	}
}

// exitUpgradeFailed is writctl's exit code for an upgrade that did not
// activate.
const exitUpgradeFailed = 5

// TestCluster_ConfigUpgrade: with a majority down an upgrade fails
// definitely (never COMMITTED), the tag stays unchanged and stays unchanged
// after the majority returns; with all nodes up it activates everywhere.
func TestCluster_ConfigUpgrade(t *testing.T) {
	c := newCluster(t, "127.0.3.16", "127.0.3.17", "127.0.3.18")
	s := c.nodes[0]
	doc := func(v string) []byte {
		return []byte(fmt.Sprintf(`{"version":%q,"settings":{"commit_timeout":"4s","max_batch":64,"log_level":"debug"}}`, v))
	}
	upgrade := func(p *proc, v string, timeout time.Duration) (*writv1.ConfigProgress, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		st, err := p.client.ConfigUpgrade(ctx, &writv1.ConfigUpgradeRequest{RequestId: "up-" + v, Document: doc(v), Format: "json", TimeoutMs: uint32(timeout.Milliseconds())})
		if err != nil {
			return nil, err
		}
		var last *writv1.ConfigProgress
		for {
			pr, err := st.Recv()
			if err != nil {
				if strings.Contains(err.Error(), "EOF") {
					return last, nil
				}
				return last, err
			}
			last = pr
		}
	}
	tags := func() []string {
		var out []string
		for _, p := range c.nodes {
			st, err := c.status(p)
			if err != nil {
				out = append(out, p.name+"=?")
				continue
			}
			out = append(out, p.name+"="+st.ConfigTag)
		}
		return out
	}
	c.kill(c.nodes[1])
	c.kill(c.nodes[2])
	// the operator's view: writctl exits non-zero and says it did not activate
	f := filepath.Join(t.TempDir(), "up.yaml")
	if err := os.WriteFile(f, []byte("version: \"9\"\nsettings:\n  commit_timeout: 4s\n  max_batch: 64\n  log_level: debug\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctl := exec.Command(filepath.Join(c.bin, "writctl"), "--addr", s.api(), "config", "upgrade", "--file", f, "--wait", "60s")
	ctl.Env = cleanEnv()
	out, err := ctl.CombinedOutput()
	if err == nil || ctl.ProcessState.ExitCode() != exitUpgradeFailed || !strings.Contains(string(out), "did NOT activate") {
		t.Fatalf("writctl config upgrade with a majority down: exit %d, want %d:\n%s", ctl.ProcessState.ExitCode(), exitUpgradeFailed, out)
	}
	last, err := upgrade(s, "2", 2*time.Second)
	if err == nil && last != nil && (last.Phase == writv1.ConfigProgress_ACTIVATED || last.Phase == writv1.ConfigProgress_RELOADED) {
		t.Fatalf("upgrade activated with a majority down: %v", last)
	}
	t.Logf("upgrade with majority down: last=%v err=%v", last, err)
	if st, _ := c.status(s); st == nil || st.ConfigTag != "0" {
		t.Fatalf("tag changed after a failed upgrade: %v", st)
	}
	c.start(c.nodes[1])
	c.start(c.nodes[2])
	c.leader(30 * time.Second)
	c.converge(30 * time.Second)
	time.Sleep(2 * time.Second)
	for _, tg := range tags() {
		if !strings.HasSuffix(tg, "=0") {
			t.Fatalf("a failed upgrade activated later: %v", tags())
		}
	}
	last, err = upgrade(c.nodes[1], "3", 10*time.Second)
	if err != nil || last == nil || last.Phase != writv1.ConfigProgress_RELOADED || last.Outcome != writv1.Outcome_COMMITTED {
		t.Fatalf("upgrade with all up: %v %v", last, err)
	}
	for _, tg := range tags() {
		if !strings.HasSuffix(tg, "=3") {
			t.Fatalf("tag not everywhere after activation: %v", tags())
		}
	}
	// the operator's view of the phases, piped and on a terminal
	checkUpgradePhases(t, c, c.nodes[2], "4")
}
