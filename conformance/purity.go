package conformance

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/schema/ir"
)

// The purity double: an evaluator that calls the handler twice on the
// same input and reports when the answers differ.

// purityEval evaluates every batch twice through the plugin and compares.
type purityEval struct {
	inner pipeline.Evaluator
	c     *collector
	mu    sync.Mutex
	seen  map[string]int // items evaluated, by type
}

func (p *purityEval) Evaluate(ctx context.Context, items []pipeline.EvalItem) ([]pipeline.EvalResult, error) {
	p.mu.Lock()
	for _, it := range items {
		p.seen[it.Type]++
	}
	p.mu.Unlock()
	r1, err := p.inner.Evaluate(ctx, items)
	if err != nil {
		return r1, err
	}
	r2, err := p.inner.Evaluate(ctx, items)
	if err != nil {
		return r1, nil
	}
	for i := range items {
		p.c.out.Cases++
		if i >= len(r1) || i >= len(r2) {
			break
		}
		if !sameResult(r1[i], r2[i]) {
			p.c.add(Finding{Code: CodeEvalImpure, Status: ir.StatusBlocked, Subject: items[i].Type,
				Message: fmt.Sprintf("item %s (%s) evaluated twice against the same state gave %s, then %s", items[i].ID, items[i].Payload, describeResult(r1[i]), describeResult(r2[i])),
				Fix:     "handlers must be pure functions of the entry and the given state: no clocks, randomness or hidden state"})
		}
		if r1[i].Err != nil && r1[i].Err.Kind == pipeline.EvalInternal {
			p.c.add(Finding{Code: CodeEvalFailed, Status: ir.StatusReviewRequired, Subject: items[i].Type,
				Message: fmt.Sprintf("item %s (%s) failed inside the handler: %s", items[i].ID, items[i].Payload, r1[i].Err.Msg),
				Fix:     "a valid entry should get an effect or a rule error, not an internal error"})
		}
	}
	return r1, nil
}

func sameResult(a, b pipeline.EvalResult) bool {
	norm := func(r pipeline.EvalResult) pipeline.EvalResult {
		if len(r.Effect.Writes) == 0 {
			r.Effect.Writes = nil
		}
		if len(r.Result) == 0 {
			r.Result = nil
		}
		if len(r.NeedKeys) == 0 {
			r.NeedKeys = nil
		}
		if len(r.Transitions) == 0 {
			r.Transitions = nil
		}
		for i := range r.Effect.Writes {
			if len(r.Effect.Writes[i].Value) == 0 {
				r.Effect.Writes[i].Value = nil
			}
		}
		return r
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

func describeResult(r pipeline.EvalResult) string {
	if r.Err != nil {
		return "error " + r.Err.Msg
	}
	var b strings.Builder
	for i, w := range r.Effect.Writes {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%s@if%d", w.Key, w.Value, w.IfRev)
	}
	if len(r.Result) > 0 {
		fmt.Fprintf(&b, " result %s", r.Result)
	}
	return "{" + b.String() + "}"
}
