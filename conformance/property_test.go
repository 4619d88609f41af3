package conformance

import (
	"context"
	"fmt"
	"testing"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/schema/ir"
)

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
	opts.checks = []string{"property.guard-sequences"}
	opts.doubles.decide = terminalEscape
	rep := mustRun(t, opts)
	c, _ := rep.Check("property.guard-sequences")
	if c.Result != Fail || !hasCode(c.Findings, CodeTerminalLeft) || !hasCode(c.Findings, CodeRegressionNotQuarantined) {
		t.Fatalf("property.guard-sequences: %s %v, want FAIL with %s and %s", c.Result, c.Findings, CodeTerminalLeft, CodeRegressionNotQuarantined)
	}
}

// impureEval is the canary "impure handler": a double around the real
// plugin that changes its answer on every call.
type impureEval struct {
	inner pipeline.Evaluator
	n     int
}

func (i *impureEval) Evaluate(ctx context.Context, items []pipeline.EvalItem) ([]pipeline.EvalResult, error) {
	rs, err := i.inner.Evaluate(ctx, items)
	for k := range rs {
		i.n++
		rs[k].Result = []byte(fmt.Sprintf(`{"call":%d}`, i.n))
	}
	return rs, err
}

func TestCanaryImpureHandler(t *testing.T) {
	opts := jobsOptions(t, TierProperty)
	opts.Cases = 300
	opts.checks = []string{"property.eval-pure"}
	opts.doubles.evaluator = func(e pipeline.Evaluator) pipeline.Evaluator { return &impureEval{inner: e} }
	rep := mustRun(t, opts)
	c, _ := rep.Check("property.eval-pure")
	if c.Result != Fail || !hasCode(c.Findings, CodeEvalImpure) {
		t.Fatalf("property.eval-pure: %s %v, want FAIL with %s", c.Result, c.Findings, CodeEvalImpure)
	}
}

// The reply-before-commit and ack-fact-before-fsync canaries are doubles of
// the suite's own request and fact paths: the pipeline offers no build-tag
// seam to break its reply or outbox ordering.
func TestCanaryReplyBeforeCommit(t *testing.T) {
	opts := jobsOptions(t, TierProperty)
	opts.Cases = 300
	opts.checks = []string{"property.reply-after-commit"}
	opts.doubles.replyBeforeCommit = true
	rep := mustRun(t, opts)
	c, _ := rep.Check("property.reply-after-commit")
	if c.Result != Fail || !hasCode(c.Findings, CodeReplyBeforeCommit) {
		t.Fatalf("property.reply-after-commit: %s %v, want FAIL with %s", c.Result, c.Findings, CodeReplyBeforeCommit)
	}
}

func TestCanaryAckFactBeforeFsync(t *testing.T) {
	opts := jobsOptions(t, TierProperty)
	opts.Cases = 300
	opts.checks = []string{"property.fact-ack-durable"}
	opts.doubles.ackBeforeFsync = true
	rep := mustRun(t, opts)
	c, _ := rep.Check("property.fact-ack-durable")
	if c.Result != Fail || !hasCode(c.Findings, CodeFactAckBeforeDurable) {
		t.Fatalf("property.fact-ack-durable: %s %v, want FAIL with %s", c.Result, c.Findings, CodeFactAckBeforeDurable)
	}
}
