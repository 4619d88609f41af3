package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// metricsFamilies is every family a node serves (docs/metrics.md lists the
// same; TestDocsListEveryFamily in metrics checks that side).
var metricsFamilies = []string{
	"writ_stage_duration_seconds", "writ_entries_total", "writ_pipeline_latch_waits_total", "writ_admission_refusals_total",
	"writ_raft_term", "writ_raft_commit_index", "writ_raft_applied_index", "writ_raft_apply_lag", "writ_raft_is_leader",
	"writ_raft_has_leader", "writ_raft_leader_changes_total", "writ_raft_proposals_dropped_total", "writ_raft_snapshots_total",
	"writ_raft_snapshot_duration_seconds", "writ_bbolt_commit_duration_seconds", "etcd_disk_wal_fsync_duration_seconds",
	"writ_outbox_depth", "writ_outbox_bytes", "writ_outbox_oldest_age_seconds", "writ_conflicts_open",
	"writ_plugin_healthy", "writ_plugin_restarts_total", "writ_plugin_call_duration_seconds", "writ_plugin_call_errors_total",
	"writ_transport_sent_messages_total", "writ_transport_sent_bytes_total", "writ_transport_received_messages_total",
	"writ_transport_received_bytes_total", "writ_ready", "writ_requests_slow_total",
	"writ_catchup_active", "writ_catchup_behind_entries", "writ_catchup_percent", "writ_catchup_eta_seconds",
	"go_goroutines", "process_resident_memory_bytes",
}

// newMetricsCluster is newCluster with a metrics listener on every node
// (host:7079); the first node also serves pprof.
func newMetricsCluster(t *testing.T, args []string, hosts ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, bin: buildBinaries(t), args: args}
	root := t.TempDir()
	for i, h := range hosts {
		p := &proc{t: t, name: fmt.Sprintf("n%d", i+1), host: h, dir: filepath.Join(root, fmt.Sprintf("n%d", i+1)),
			args: []string{"--metrics-addr", h + ":7079"}}
		if i == 0 {
			p.args = append(p.args, "--debug-pprof")
		} else {
			p.join = c.nodes[0].gossip()
		}
		c.nodes = append(c.nodes, p)
		c.start(p)
		if i == 0 {
			c.waitReady(p, 20*time.Second)
		}
	}
	t.Cleanup(c.stopAll)
	for _, p := range c.nodes {
		c.waitReady(p, 40*time.Second)
	}
	c.waitVoters(len(hosts), 40*time.Second)
	return c
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	cl := &http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// scrape parses a node's /metrics with the Prometheus text parser.
func scrape(t *testing.T, p *proc) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := httpGet(t, "http://"+p.host+":7079/metrics")
	if code != http.StatusOK {
		t.Fatalf("%s /metrics: %d %s", p.name, code, body)
	}
	tp := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := tp.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("%s /metrics does not parse: %v", p.name, err)
	}
	return fams
}

// total sums a family's values (counter, gauge, untyped) or observation
// counts (histogram), over the series whose labels include match.
func total(f *dto.MetricFamily, match map[string]string) float64 {
	if f == nil {
		return 0
	}
	v := 0.0
next:
	for _, m := range f.GetMetric() {
		for k, want := range match {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == k && l.GetValue() == want {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			v += m.GetCounter().GetValue()
		case m.Gauge != nil:
			v += m.GetGauge().GetValue()
		case m.Histogram != nil:
			v += float64(m.GetHistogram().GetSampleCount())
		case m.Untyped != nil:
			v += m.GetUntyped().GetValue()
		}
	}
	return v
}

func grpcHealth(t *testing.T, p *proc, service string) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r, err := healthpb.NewHealthClient(p.conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		t.Fatalf("%s grpc health check %q: %v", p.name, service, err)
	}
	return r.GetStatus()
}

func bench(t *testing.T, bin, addr string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "writctl"), append([]string{"--addr", addr, "bench"}, args...)...)
	cmd.Env = cleanEnv()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("writctl bench %v: %v\n%s", args, err, out.String())
	}
	return out.String()
}

// TestCluster_MetricsAndHealth runs a real 3-node cluster under writctl
// bench, scrapes every node's /metrics, checks every family is there and
// the ones load moves are non-zero, then checks the health endpoints and
// the gRPC health service, and that /readyz flips when quorum is lost.
func TestCluster_MetricsAndHealth(t *testing.T) {
	// A snapshot is due every 50 raft entries: the load below is 1,800
	// commands, which a loaded machine batches into as few as ~90 entries
	// (20 clients: at most 20 commands per entry), so 500 was sometimes
	// never reached.
	// The load must commit, not measure latency: with the default 5 s
	// commit timeout a machine loaded far past its cores answered a bench
	// write UNCERTAIN (exit 5).
	c := newMetricsCluster(t, []string{"--raft-snapshot-entries", "50", "--log-format", "json", "--pipeline-commit-timeout", "30s"}, "127.0.17.1", "127.0.17.2", "127.0.17.3")
	for _, p := range c.nodes {
		for _, path := range []string{"/livez", "/readyz", "/healthz"} {
			if code, body := httpGet(t, "http://"+p.host+":7079"+path); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
				t.Fatalf("%s %s on a healthy cluster: %d %q", p.name, path, code, body)
			}
		}
		for _, svc := range []string{"", "writ.v1.Writ"} {
			// the service follows readiness within its 1s refresh
			deadline := time.Now().Add(3 * time.Second)
			for st := grpcHealth(t, p, svc); st != healthpb.HealthCheckResponse_SERVING; st = grpcHealth(t, p, svc) {
				if time.Now().After(deadline) {
					t.Fatalf("%s grpc health %q: %v, want SERVING", p.name, svc, st)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	if code, _ := httpGet(t, "http://127.0.17.1:7079/debug/pprof/"); code != http.StatusOK {
		t.Fatalf("pprof with debug.pprof on: %d", code)
	}
	if code, _ := httpGet(t, "http://127.0.17.2:7079/debug/pprof/"); code != http.StatusNotFound {
		t.Fatalf("pprof with debug.pprof off: %d, want 404", code)
	}

	l := c.leader(10 * time.Second)
	follower := c.nodes[0]
	if follower == l {
		follower = c.nodes[1]
	}
	t.Log(bench(t, c.bin, l.api(), "-c", "20", "-n", "1500"))
	t.Log(bench(t, c.bin, follower.api(), "-c", "10", "-n", "300", "-t", "job.state_report"))
	// one refusal at ingress
	if _, err := submit(l, "job.submit", `{"nope":1}`, time.Second); err == nil {
		t.Fatal("an invalid payload was accepted")
	}

	// A snapshot is taken in the background once enough entries applied:
	// on a loaded machine it can land a little after the load ends.
	for _, p := range c.nodes {
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if total(scrape(t, p)["writ_raft_snapshots_total"], nil) > 0 {
				break
			}
		}
	}
	for _, p := range c.nodes {
		fams := scrape(t, p)
		for _, name := range metricsFamilies {
			if fams[name] == nil {
				t.Errorf("%s: family %s missing from /metrics", p.name, name)
			}
		}
		moved := []struct {
			name  string
			match map[string]string
		}{
			{"writ_raft_term", nil}, {"writ_raft_commit_index", nil}, {"writ_raft_applied_index", nil},
			{"writ_raft_has_leader", nil}, {"writ_ready", nil}, {"writ_raft_snapshots_total", nil},
			{"writ_raft_snapshot_duration_seconds", nil},
			{"writ_stage_duration_seconds", map[string]string{"stage": "apply"}},
			{"writ_bbolt_commit_duration_seconds", nil}, {"etcd_disk_wal_fsync_duration_seconds", nil},
			{"writ_transport_sent_messages_total", nil}, {"writ_transport_sent_bytes_total", nil},
			{"writ_transport_received_messages_total", nil}, {"writ_transport_received_bytes_total", nil},
			{"writ_plugin_healthy", map[string]string{"plugin": "writ-jobs"}},
		}
		if p == l || p == follower {
			// where the load entered
			for _, s := range []string{"validate", "evaluate", "append", "commit_wait"} {
				moved = append(moved, struct {
					name  string
					match map[string]string
				}{"writ_stage_duration_seconds", map[string]string{"stage": s}})
			}
			moved = append(moved, struct {
				name  string
				match map[string]string
			}{"writ_plugin_call_duration_seconds", nil})
		}
		if p == l {
			moved = append(moved, []struct {
				name  string
				match map[string]string
			}{
				{"writ_entries_total", map[string]string{"type": "job.submit", "class": "request", "outcome": "COMMITTED"}},
				{"writ_entries_total", map[string]string{"outcome": "REJECTED"}},
				{"writ_admission_refusals_total", nil},
				{"writ_raft_is_leader", nil},
				{"writ_stage_duration_seconds", map[string]string{"stage": "reply"}},
			}...)
		}
		if p == follower {
			moved = append(moved, []struct {
				name  string
				match map[string]string
			}{
				{"writ_entries_total", map[string]string{"type": "job.state_report", "class": "fact", "outcome": "RECEIVED"}},
			}...)
		}
		for _, m := range moved {
			if v := total(fams[m.name], m.match); v <= 0 {
				t.Errorf("%s: %s%v is %v under load, want > 0", p.name, m.name, m.match, v)
			}
		}
		if v := total(fams["writ_raft_apply_lag"], nil); v < 0 {
			t.Errorf("%s: negative apply lag %v", p.name, v)
		}
		if lc := total(fams["writ_raft_leader_changes_total"], nil); lc < 1 {
			t.Errorf("%s: writ_raft_leader_changes_total %v, want >= 1 (it saw the first leader)", p.name, lc)
		}
	}
	if t.Failed() {
		return
	}

	// A plugin crash: the host restarts it; the restart is counted and the
	// plugin is healthy again.
	victim := c.nodes[2]
	if r := total(scrape(t, victim)["writ_plugin_restarts_total"], nil); r != 0 {
		t.Fatalf("plugin restarts %v before any crash", r)
	}
	pid := childPID(t, victim.pid(), "writ-jobs")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		f := scrape(t, victim)
		r := total(f["writ_plugin_restarts_total"], map[string]string{"plugin": "writ-jobs"})
		h := total(f["writ_plugin_healthy"], map[string]string{"plugin": "writ-jobs"})
		if r >= 1 && h == 1 {
			t.Logf("plugin killed: restarts %v, healthy %v", r, h)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after killing the plugin: restarts %v healthy %v (want >= 1 and 1 within 20s)", r, h)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Quorum loss: kill two of three; the survivor's /readyz says why.
	survivor := c.nodes[0]
	c.kill(c.nodes[1])
	c.kill(c.nodes[2])
	deadline = time.Now().Add(20 * time.Second)
	for {
		code, body := httpGet(t, "http://"+survivor.host+":7079/readyz")
		if code == http.StatusServiceUnavailable && strings.Contains(body, "no raft leader") {
			t.Logf("/readyz after quorum loss: %d %s", code, strings.TrimSpace(body))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz did not flip within 20s of quorum loss: %d %q", code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code, body := httpGet(t, "http://"+survivor.host+":7079/healthz"); code != http.StatusOK || !strings.HasPrefix(body, "degraded: ") {
		t.Fatalf("/healthz after quorum loss: %d %q, want 200 degraded with reasons", code, body)
	}
	if code, _ := httpGet(t, "http://"+survivor.host+":7079/livez"); code != http.StatusOK {
		t.Fatalf("/livez after quorum loss: %d", code)
	}
	deadline = time.Now().Add(5 * time.Second)
	for grpcHealth(t, survivor, "") != healthpb.HealthCheckResponse_NOT_SERVING {
		if time.Now().After(deadline) {
			t.Fatal("grpc health still SERVING 5s after /readyz flipped")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if v := total(scrape(t, survivor)["writ_ready"], nil); v != 0 {
		t.Fatalf("writ_ready %v after quorum loss, want 0", v)
	}
	checkJSONLogs(t, c)
}

// childPID finds the child process of parent named name (/proc scan).
func childPID(t *testing.T, parent int, name string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(b)
		open, closeP := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closeP < 0 {
			continue
		}
		f := strings.Fields(s[closeP+1:])
		if len(f) > 1 && s[open+1:closeP] == name && f[1] == strconv.Itoa(parent) {
			return pid
		}
	}
	t.Fatalf("no %s child of pid %d", name, parent)
	return 0
}

// checkJSONLogs: every JSON log line the nodes wrote carries each key once.
func checkJSONLogs(t *testing.T, c *cluster) {
	t.Helper()
	lines := 0
	for _, p := range c.nodes {
		b, err := os.ReadFile(p.dir + ".log")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(line, "{") {
				continue // the start-up banner on stdout
			}
			lines++
			dec := json.NewDecoder(strings.NewReader(line))
			if _, err := dec.Token(); err != nil {
				t.Fatalf("%s: %q: %v", p.name, line, err)
			}
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					t.Fatalf("%s: %q: %v", p.name, line, err)
				}
				var v json.RawMessage
				if err := dec.Decode(&v); err != nil {
					t.Fatalf("%s: %q: %v", p.name, line, err)
				}
				if seen[k.(string)] {
					t.Errorf("%s: key %q twice on %s", p.name, k, line)
				}
				seen[k.(string)] = true
			}
		}
	}
	if lines < 10 {
		t.Fatalf("only %d JSON log lines: is --log-format json applied?", lines)
	}
	t.Logf("%d JSON log lines, each key once", lines)
}
