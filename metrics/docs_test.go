package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// exercised is a Metrics whose every family has at least one series.
func exercised(t *testing.T) *Metrics {
	t.Helper()
	m := New()
	m.DeclareTypes(map[string]string{"job.submit": "request"})
	for _, s := range stages {
		m.ObserveStage(s, time.Millisecond)
	}
	m.CountOutcome("job.submit", "request", "COMMITTED")
	m.LatchWait()
	m.AdmissionRefused("validation")
	m.SlowRequest()
	m.LeaderChanged()
	m.ProposalDropped()
	m.SnapshotTaken(time.Millisecond)
	m.StateCommitted(time.Millisecond)
	m.PeerSent("1", 1, 10)
	m.PeerReceived("1", 1, 10)
	m.PluginCall(time.Millisecond, true)
	m.WatchState(func() State { return State{Plugins: []PluginState{{Name: "p", Healthy: true}}} })
	return m
}

func families(t *testing.T, m *Metrics) []string {
	t.Helper()
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range fams {
		out = append(out, f.GetName())
	}
	return out
}

// TestDocsListEveryFamily: docs/metrics.md names every writ_ family the
// registry serves, and names nothing it does not serve.
func TestDocsListEveryFamily(t *testing.T) {
	b, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	served := map[string]bool{}
	for _, f := range families(t, exercised(t)) {
		served[f] = true
		if !strings.Contains(doc, "`"+f+"`") {
			t.Errorf("docs/metrics.md does not list family %s", f)
		}
	}
	if len(served) < 25 {
		t.Fatalf("only %d families served: %v", len(served), served)
	}
	for _, m := range regexp.MustCompile("`(writ_[a-z_]+)`").FindAllStringSubmatch(doc, -1) {
		if !served[m[1]] {
			t.Errorf("docs/metrics.md lists %s, which is not served", m[1])
		}
	}
}

// TestDashboardUsesServedFamilies: the example dashboard parses and every
// family its queries use is served (writ_*) or etcd's WAL family.
func TestDashboardUsesServedFamilies(t *testing.T) {
	b, err := os.ReadFile("../deploy/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("deploy/grafana-dashboard.json: %v", err)
	}
	served := map[string]bool{"etcd_disk_wal_fsync_duration_seconds": true}
	for _, f := range families(t, exercised(t)) {
		served[f] = true
	}
	used := map[string]bool{}
	re := regexp.MustCompile(`\b((?:writ|etcd)_[a-z_]+)`)
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, m := range re.FindAllStringSubmatch(tg.Expr, -1) {
				name := m[1]
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					if base := strings.TrimSuffix(name, suf); base != name && served[base] {
						name = base
					}
				}
				used[name] = true
				if !served[name] {
					t.Errorf("panel %q queries %s, which is not served", p.Title, m[1])
				}
			}
		}
	}
	for f := range served {
		if strings.HasPrefix(f, "writ_") && !used[f] {
			t.Errorf("dashboard has no panel for %s", f)
		}
	}
}
