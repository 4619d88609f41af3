package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/internal/proctest"
)

// outcomeOf is the writ outcome and reason of a Submit reply: COMMITTED
// with its response, or the outcome carried by the error (OUTCOME_UNSPECIFIED
// for an RPC error without one).
func outcomeOf(r *writv1.SubmitResponse, err error) (writv1.Outcome, string) {
	if err == nil {
		return r.Outcome, r.Reason
	}
	if d, ok := api.OutcomeFromError(err); ok {
		return d.Outcome, d.Reason
	}
	return writv1.Outcome_OUTCOME_UNSPECIFIED, err.Error()
}

// The rolling-upgrade schemas: v1 is the lease test schema, v2 adds
// lease.renew and widens ttl_ms (compatible), v3 removes lease.release
// (BLOCKED). writ-lease-rt serves any of them: it loads the schema in
// "schema" next to its executable.
var (
	rollOnce sync.Once
	rollDir  string
	rollErr  error
)

// rollingVersions lays out (once) one directory per schema version holding
// writ-lease-rt and the version's schema; it returns the writd flags that
// run each version.
func rollingVersions(t *testing.T) map[string][]string {
	t.Helper()
	bin := buildBinaries(t)
	rollOnce.Do(func() {
		// beside the test binaries, so it goes where they go
		rollDir = filepath.Join(bin, "rolling")
		src := filepath.Join(bin, "writ-lease-rt")
		for _, v := range []string{"v1", "v2", "v3"} {
			cue, err := os.ReadFile(filepath.Join("testdata/rolling", v, "lease.cue"))
			if err != nil {
				rollErr = err
				return
			}
			d := filepath.Join(rollDir, v)
			if rollErr = os.MkdirAll(filepath.Join(d, "schema"), 0o700); rollErr != nil {
				return
			}
			if rollErr = os.WriteFile(filepath.Join(d, "schema", "lease.cue"), cue, 0o600); rollErr != nil {
				return
			}
			if rollErr = linkOrCopy(src, filepath.Join(d, "writ-lease-rt")); rollErr != nil {
				return
			}
		}
	})
	if rollErr != nil {
		t.Fatal(rollErr)
	}
	out := map[string][]string{}
	for _, v := range []string{"v1", "v2", "v3"} {
		d := filepath.Join(rollDir, v)
		out[v] = []string{"--schema", filepath.Join(d, "schema"), "--plugin", pinned(t, filepath.Join(d, "writ-lease-rt"))}
	}
	return out
}

// linkOrCopy hard-links src to dst (the plugin finds its schema next to
// the path it was started by), copying when a link is not possible.
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o700)
}

// rollingLoad submits lease.acquire requests in a loop against the nodes
// that are up, each to the next one, until stopped. A request is done when
// it is COMMITTED; UNAVAILABLE, UNCERTAIN or an RPC error (a node stopping)
// retries the same request ID on the next node, so nothing acknowledged is
// lost and nothing is applied twice. Any other outcome is a failure.
type rollingLoad struct {
	t       *testing.T
	mu      sync.Mutex
	up      map[*proc]bool
	order   []*proc
	next    int
	done    atomic.Int64
	retries atomic.Int64
	failed  []string
	gen     *proctest.Load
}

func (l *rollingLoad) setUp(p *proc, up bool) {
	l.mu.Lock()
	l.up[p] = up
	l.mu.Unlock()
}

func (l *rollingLoad) pick() *proc {
	l.mu.Lock()
	defer l.mu.Unlock()
	for range l.order {
		p := l.order[l.next%len(l.order)]
		l.next++
		if l.up[p] {
			return p
		}
	}
	return nil
}

func (l *rollingLoad) run(workers int) {
	l.gen = proctest.StartLoad(workers, func(w, seq int) {
		id := fmt.Sprintf("roll-%d-%d", w, seq)
		payload := fmt.Sprintf(`{"lease_id":"l-%d-%d","holder":"load","ttl_ms":1000}`, w, seq)
		l.one(id, payload)
	})
}

// one drives one request to a definite outcome (bounded: 60 s).
func (l *rollingLoad) one(id, payload string) {
	deadline := time.Now().Add(60 * time.Second)
	for attempt := 0; ; attempt++ {
		if time.Now().After(deadline) {
			l.fail(fmt.Sprintf("%s: no definite outcome within 60s", id))
			return
		}
		p := l.pick()
		if p == nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 7*time.Second)
		r, err := p.client.Submit(ctx, &writv1.SubmitRequest{Entry: &writv1.Entry{Type: "lease.acquire", Id: id, Payload: []byte(payload)}, TimeoutMs: 5000})
		cancel()
		switch o, why := outcomeOf(r, err); o {
		case writv1.Outcome_COMMITTED:
			l.done.Add(1)
			return
		case writv1.Outcome_REJECTED:
			l.fail(fmt.Sprintf("%s on %s: REJECTED: %s", id, p.name, why))
			return
		case writv1.Outcome_NOT_COMMITTED:
			// Its ID was fenced after a commit timeout during a restart:
			// definitely not committed, so the same operation goes again
			// under a new ID (the fenced one is spent).
			id = fmt.Sprintf("%s-r%d", id, attempt)
		}
		l.retries.Add(1)
		time.Sleep(50 * time.Millisecond)
	}
}

func (l *rollingLoad) fail(s string) {
	l.mu.Lock()
	l.failed = append(l.failed, s)
	l.mu.Unlock()
}

// membersOf is `writctl members` on p.
func membersOf(p *proc) (*writv1.MembersResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return p.client.Members(ctx, &writv1.MembersRequest{})
}

// waitMember waits until p sees id as a voter in the raft configuration
// announcing fingerprint fp ("" any), with no refusal.
func (c *cluster) waitMember(p *proc, id, fp string, d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	last := ""
	for time.Now().Before(deadline) {
		m, err := membersOf(p)
		if err == nil {
			for _, x := range m.Members {
				if x.Id == id {
					last = fmt.Sprintf("role %q status %q fp %s refused %q", x.Role, x.Status, x.SchemaFingerprint, x.Refused)
					if x.Role == "voter" && x.Status == "alive" && x.Refused == "" && (fp == "" || x.SchemaFingerprint == fp) {
						return
					}
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("%s: member %s not an alive voter on schema %s within %s: %s", p.name, id, fp, d, last)
}

func fingerprintOf(c *cluster, p *proc) string {
	c.t.Helper()
	st, err := c.status(p)
	if err != nil {
		c.t.Fatal(err)
	}
	return st.SchemaFingerprint
}

// TestRollingUpgrade rolls a 3-node cluster of real writd processes from
// schema v1 to v2 (an added type, a widened bound) one node at a time
// (stop, restart with --schema v2 and its plugin) under a steady load of
// submits that sees no failed request, checks that the new type is refused
// while a member still runs v1, and uses it once every member runs v2.
func TestRollingUpgrade(t *testing.T) {
	vs := rollingVersions(t)
	common := []string{"--membership-profile", "local", "--insecure"}
	c := newClusterArgs(t, append(append([]string{}, common...), vs["v1"]...), "127.0.45.1", "127.0.45.2", "127.0.45.3")
	c.args = common
	for _, p := range c.nodes {
		p.args = vs["v1"]
	}
	v1fp := fingerprintOf(c, c.nodes[0])
	t0 := time.Now()
	step := func(f string, a ...any) { t.Logf("%6.1fs %s", time.Since(t0).Seconds(), fmt.Sprintf(f, a...)) }

	load := &rollingLoad{t: t, up: map[*proc]bool{}, order: c.nodes}
	for _, p := range c.nodes {
		load.setUp(p, true)
	}
	load.run(2)
	// The writctl binary's own load, beside it: 4 clients over all three
	// endpoints, each write driven to a definite answer (failover, same ID).
	bench := startBench(t, c, "--clients", "4", "--ops", "100000000", "--retry", "60s",
		"--type", "lease.acquire", "--payload", `{"lease_id":"b-{{run}}-{{seq}}","holder":"bench","ttl_ms":1000}`)
	defer bench.kill()
	defer load.gen.Stop()

	var v2fp string
	for i, p := range c.nodes {
		// let the load run against the current mix for a moment
		before := load.done.Load()
		waitCount(t, &load.done, before+20, 30*time.Second)

		load.setUp(p, false)
		c.stop(p)
		p.args = vs["v2"]
		c.start(p)
		c.waitReady(p, 40*time.Second)
		if v2fp == "" {
			v2fp = fingerprintOf(c, p)
			if v2fp == v1fp {
				t.Fatalf("v2 has v1's fingerprint %s", v1fp)
			}
		}
		for _, o := range c.nodes {
			c.waitMember(o, p.name, v2fp, 40*time.Second)
		}
		load.setUp(p, true)
		step("%s restarted on v2 and back as a voter (%d committed so far)", p.name, load.done.Load())

		if i < len(c.nodes)-1 {
			// mixed: the v2 node refuses the new type; a v1 node does not know
			// it (or forwards it to a v2 leader, which refuses it)
			o, why := outcomeOf(submit(p, "lease.renew", `{"lease_id":"x","holder":"h","ttl_ms":1000}`, 5*time.Second))
			if o != writv1.Outcome_REJECTED || !strings.Contains(why, "not active in the cluster yet") || !strings.Contains(why, "does not declare it") {
				t.Fatalf("lease.renew on %s (v2) while %d node(s) run v1: %s %s", p.name, len(c.nodes)-1-i, o, why)
			}
			v1 := c.nodes[len(c.nodes)-1]
			if o, why := outcomeOf(submit(v1, "lease.renew", `{"lease_id":"x","holder":"h","ttl_ms":1000}`, 5*time.Second)); o != writv1.Outcome_REJECTED || !strings.Contains(why, "unknown entry type") && !strings.Contains(why, "not active in the cluster yet") {
				t.Fatalf("lease.renew on %s (v1): %s %s", v1.name, o, why)
			}
		}
	}
	waitCount(t, &load.done, load.done.Load()+20, 30*time.Second)
	load.gen.Stop()
	t.Logf("rolling upgrade under load: %d requests committed, %d retried attempts, %d failed", load.done.Load(), load.retries.Load(), len(load.failed))
	if len(load.failed) > 0 {
		t.Fatalf("%d request(s) failed during the rolling upgrade, e.g. %s", len(load.failed), load.failed[0])
	}
	br := bench.stop(t)
	t.Logf("writctl bench during the rolling upgrade: %d ops, %v, %d retried, %d resent under a new ID, p99 %.1fms, longest gap %.0fms",
		br.Ops, br.Outcomes, br.Retried, br.Resent, br.P99, br.MaxGap)
	if br.Ops < 20 || br.Outcomes["COMMITTED"] != br.Ops {
		t.Fatalf("writctl bench: %d ops, outcomes %v: every one must be COMMITTED", br.Ops, br.Outcomes)
	}
	if br.Resent != 0 {
		// a graceful restart hands leadership over and drains its calls:
		// no request may be given up as NOT_COMMITTED on the way
		t.Fatalf("writctl bench: %d request(s) were NOT_COMMITTED during the rolling upgrade and had to be resent", br.Resent)
	}

	// every member runs v2: the new type and the widened bound work
	n1, n2 := c.nodes[0], c.nodes[1]
	r, err := submit(n1, "lease.acquire", `{"lease_id":"wide","holder":"alice","ttl_ms":7000000}`, 5*time.Second)
	if err != nil || r.Outcome != writv1.Outcome_COMMITTED {
		t.Fatalf("acquire with ttl_ms 7000000 (v2's bound): %v %v", r, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err = submit(n2, "lease.renew", `{"lease_id":"wide","holder":"alice","ttl_ms":7100000}`, 5*time.Second)
		if err == nil && r.Outcome == writv1.Outcome_COMMITTED {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease.renew after the upgrade: %v %v", r, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(string(r.Result), `"ttl_ms":7100000`) {
		t.Fatalf("renew result: %s", r.Result)
	}
	c.converge(30 * time.Second)
}

func waitCount(t *testing.T, n *atomic.Int64, want int64, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for n.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("load: %d requests committed, want %d within %s", n.Load(), want, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRollingUpgradeBlocked: a new node on v2 (compatible) is admitted to a
// v1 cluster; a node on v3 (lease.release removed: BLOCKED) is refused
// with the finding code and the fix, logged by the cluster and by the node
// and shown by `writctl members`; a member restarted in place on v3
// refuses to start, naming the code; restarted on v1 it rejoins.
func TestRollingUpgradeBlocked(t *testing.T) {
	vs := rollingVersions(t)
	common := []string{"--membership-profile", "local", "--insecure"}
	c := newClusterArgs(t, append(append([]string{}, common...), vs["v1"]...), "127.0.45.11", "127.0.45.12")
	c.args = common
	for _, p := range c.nodes {
		p.args = vs["v1"]
	}
	n1, n2 := c.nodes[0], c.nodes[1]
	root := filepath.Dir(n1.dir)
	t0 := time.Now()
	step := func(s string) { t.Logf("%6.1fs %s", time.Since(t0).Seconds(), s) }

	// a new node on v2 (compatible) is admitted: learner, then voter
	n4 := &proc{t: t, name: "n4", host: "127.0.45.14", dir: filepath.Join(root, "n4"), join: n1.gossip(), args: vs["v2"]}
	c.nodes = append(c.nodes, n4)
	c.start(n4)
	c.waitReady(n4, 40*time.Second)
	c.waitMember(n1, "n4", "", 40*time.Second)

	step("v2 newcomer admitted")
	// a new node on v3
	n3 := &proc{t: t, name: "n3", host: "127.0.45.13", dir: filepath.Join(root, "n3"), join: n1.gossip(), args: vs["v3"]}
	c.nodes = append(c.nodes, n3)
	c.start(n3)
	deadline := time.Now().Add(40 * time.Second)
	reason := ""
	for reason == "" {
		if time.Now().After(deadline) {
			t.Fatal("n3 (v3) was not refused within 40s")
		}
		if m, err := membersOf(n1); err == nil {
			for _, r := range m.Refused {
				if r.Id == "n3" && strings.Contains(r.Reason, "WRIT_COMPAT_TYPE_REMOVED") {
					reason = r.Reason
				}
			}
			for _, x := range m.Members {
				if x.Id == "n3" && x.Role != "" {
					t.Fatalf("n3 (v3) was admitted as %s", x.Role)
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(reason, "lease.release") || !strings.Contains(reason, "fix: keep the type") {
		t.Fatalf("refusal reason does not name the type and the fix: %s", reason)
	}
	out, code := writctl(t, c.bin, "--addr", n2.api(), "members")
	if code != 0 || !strings.Contains(out, "WRIT_COMPAT_TYPE_REMOVED") {
		t.Fatalf("writctl members (exit %d) does not show why n3 is refused:\n%s", code, out)
	}
	b, _ := os.ReadFile(n1.dir + ".log")
	if !strings.Contains(string(b), "membership: node refused") || !strings.Contains(string(b), "WRIT_COMPAT_TYPE_REMOVED") {
		t.Fatalf("n1's log does not record the refusal")
	}
	step("v3 newcomer refused")
	deadline = time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(n3.dir + ".log")
		if strings.Contains(string(b), "the cluster refuses this node") && strings.Contains(string(b), "WRIT_COMPAT_TYPE_REMOVED") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("n3's own log does not say why it is refused")
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.stop(n3)

	step("refusal in the refused node's log")
	// n2 restarted in place on v3 refuses to start
	c.stop(n2)
	args := append([]string{"--node-id", n2.name, "--data-dir", n2.dir, "--api-addr", n2.api(), "--raft-addr", n2.host + ":7071",
		"--gossip-addr", n2.gossip(), "--join", n1.gossip()}, append(common, vs["v3"]...)...)
	ec, so, se := runWritd(t, c.bin, nil, args...)
	if ec == 0 || !strings.Contains(so+se, "WRIT_COMPAT_TYPE_REMOVED") || !strings.Contains(so+se, "fix:") {
		t.Fatalf("n2 restarted on v3: exit %d, want non-zero naming WRIT_COMPAT_TYPE_REMOVED and the fix:\n%s%s", ec, so, se)
	}
	step("in-place restart on v3 refused at start")
	// a data directory that recorded no schema (written by an older writd)
	// lets it start on v3; the cluster then refuses the member in place:
	// `writctl members` shows why on its row
	if err := os.Remove(filepath.Join(n2.dir, "schema-model.json")); err != nil {
		t.Fatal(err)
	}
	n2.args = vs["v3"]
	c.start(n2)
	deadline = time.Now().Add(40 * time.Second)
	for {
		m, err := membersOf(n1)
		row := ""
		if err == nil {
			for _, x := range m.Members {
				if x.Id == "n2" {
					row = x.Refused
				}
			}
		}
		if strings.Contains(row, "WRIT_COMPAT_TYPE_REMOVED") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("n2 restarted in place on v3 is not shown refused: %q %v", row, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	out, _ = writctl(t, c.bin, "--addr", n1.api(), "members")
	if !strings.Contains(out, "WRIT_COMPAT_TYPE_REMOVED") {
		t.Fatalf("writctl members does not show why n2 is refused:\n%s", out)
	}
	c.stop(n2)

	step("in-place member on v3 shown refused")
	// back on v1 it rejoins
	n2.args = vs["v1"]
	c.start(n2)
	c.waitReady(n2, 40*time.Second)
	c.waitMember(n1, "n2", "", 40*time.Second)
	step("back on v1: rejoined")
}
