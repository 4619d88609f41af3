package conformance

import (
	"context"
	"fmt"
	"testing"

	"github.com/writ-dev/writ/pipeline"
)

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
