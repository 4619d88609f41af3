package conformance

import (
	"testing"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/schema/ir"
)

func TestJobsPropertyGuardsAndValidation(t *testing.T) {
	opts := Options{SchemaDir: jobsSchema, Catalogs: []ir.Catalog{jobsgen.Catalog()}, Only: []Tier{TierProperty}, Cases: 3000}
	rep := mustRun(t, opts)
	for _, id := range []string{"property.validate-cue", "property.codec-roundtrip", "property.guard-sequences"} {
		c, _ := rep.Check(id)
		if c.Result != Pass {
			t.Errorf("%s: %s %s %v", id, c.Result, c.Reason, c.Findings)
		}
		if c.Cases < 1000 {
			t.Errorf("%s ran only %d cases", id, c.Cases)
		}
	}
}

// terminalEscape is the canary "guard allowing terminal → non-terminal",
// implemented as a double of pipeline.Decide because the pipeline offers no
// build-tag seam for its guard.
func terminalEscape(m *ir.Machine, cur pipeline.MachineRecord, exists bool, to string, order uint64, hasOrder bool, illegal pipeline.Verdict) (pipeline.Verdict, string) {
	if exists && m.IsTerminal(cur.State) && m.HasState(to) && !m.IsTerminal(to) {
		return pipeline.VerdictApply, ""
	}
	return pipeline.Decide(m, cur, exists, to, order, hasOrder, illegal)
}

func TestCanaryGuardAllowsTerminalExit(t *testing.T) {
	opts := Options{SchemaDir: jobsSchema, Catalogs: []ir.Catalog{jobsgen.Catalog()}, Only: []Tier{TierProperty}, Cases: 2000}
	opts.doubles.decide = terminalEscape
	rep := mustRun(t, opts)
	c, _ := rep.Check("property.guard-sequences")
	if c.Result != Fail || !hasCode(c.Findings, CodeTerminalLeft) || !hasCode(c.Findings, CodeRegressionNotQuarantined) {
		t.Fatalf("property.guard-sequences: %s %v, want FAIL with %s and %s", c.Result, c.Findings, CodeTerminalLeft, CodeRegressionNotQuarantined)
	}
}
