package conformance

import (
	"bytes"
	"strings"
	"testing"
)

// notImplemented are the checks this version of the suite reports NOT RUN
// on purpose (each says why in its reason).
var notImplemented = map[string]bool{}

// minCases is the least a 10,000-case run must exercise per property check
// (pipeline workload checks run max(10, cases/500) workloads).
var minCases = map[string]int{
	"property.validate-cue":       DefaultCases,
	"property.codec-roundtrip":    DefaultCases / 2,
	"property.guard-sequences":    DefaultCases,
	"property.eval-pure":          100,
	"property.apply-idempotent":   100,
	"property.fact-sequences":     1000,
	"property.conflict-cases":     1,
	"property.reply-after-commit": 100,
	"property.fact-ack-durable":   20,
}

// TestConformanceJobs is what CI runs: the whole suite (static, property
// with 10,000 cases, cluster of 3 real writd processes with the real jobs
// plugin on 127.0.5.1–3) over the reference jobs domain. Every check must
// pass except the ones the suite does not implement, which must say NOT RUN.
func TestConformanceJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real writd processes: skipped with -short")
	}
	opts := jobsOptions(t)
	opts.Cases = DefaultCases
	opts.Cluster.Hosts = []string{"127.0.5.1", "127.0.5.2", "127.0.5.3"}
	rep := mustRun(t, opts)
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", text.String())
	for _, c := range rep.Checks {
		switch {
		case c.Result == Fail:
			t.Errorf("%s failed: %v", c.ID, c.Findings)
		case c.Result == NotRun && c.ID == "cluster.commit-timeout" && strings.Contains(c.Reason, "stepped down"):
			// Timing: the leader noticed the quorum loss before the
			// timeout; reported NOT RUN, never PASS.
			t.Logf("%s: %s", c.ID, c.Reason)
		case c.Result == NotRun && !notImplemented[c.ID]:
			t.Errorf("%s did not run: %s", c.ID, c.Reason)
		case c.Result == Pass && notImplemented[c.ID]:
			t.Errorf("%s passed but the suite does not implement it", c.ID)
		}
		if c.Tier == TierProperty && c.Cases < minCases[c.ID] {
			t.Errorf("%s exercised only %d cases", c.ID, c.Cases)
		}
	}
}
