package pipelinetest

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/pipeline"
)

// FakeEvaluator is a scriptable handler: for every item it writes the
// payload to each handler-owned key the item touches, unless told to be
// down, to refuse a type, or to add transitions.
type FakeEvaluator struct {
	mu          sync.Mutex
	down        bool
	refuse      map[string]string
	transitions map[string][]pipeline.Transition
	Calls       int
	Batches     []int
}

var _ pipeline.Evaluator = (*FakeEvaluator)(nil)

// NewFakeEvaluator returns a healthy handler.
func NewFakeEvaluator() *FakeEvaluator {
	return &FakeEvaluator{refuse: map[string]string{}, transitions: map[string][]pipeline.Transition{}}
}

// SetDown makes every call fail (handler process down).
func (f *FakeEvaluator) SetDown(down bool) { f.mu.Lock(); f.down = down; f.mu.Unlock() }

// Refuse makes the handler refuse a type with a domain rule ("" clears).
func (f *FakeEvaluator) Refuse(typ, msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if msg == "" {
		delete(f.refuse, typ)
	} else {
		f.refuse[typ] = msg
	}
}

// AddTransition makes items of typ also request a transition.
func (f *FakeEvaluator) AddTransition(typ string, t pipeline.Transition) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.transitions[typ] = append(f.transitions[typ], t)
}

// Evaluate implements pipeline.Evaluator.
func (f *FakeEvaluator) Evaluate(ctx context.Context, items []pipeline.EvalItem) ([]pipeline.EvalResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls++
	f.Batches = append(f.Batches, len(items))
	if f.down {
		return nil, fmt.Errorf("fake handler: %w", &pipeline.EvalError{Kind: pipeline.EvalUnavailable, Msg: "handler process is down"})
	}
	out := make([]pipeline.EvalResult, len(items))
	for i, it := range items {
		if msg, ok := f.refuse[it.Type]; ok {
			out[i].Err = &pipeline.EvalError{Kind: pipeline.EvalRule, Msg: msg}
			continue
		}
		for _, r := range it.State {
			if strings.HasPrefix(r.Key, "_") {
				continue
			}
			out[i].Effect.Writes = append(out[i].Effect.Writes, kv.Write{Key: r.Key, Value: it.Payload, IfRev: r.Rev})
		}
		out[i].Result = []byte(`{"handled":"` + it.ID + `"}`)
		out[i].Transitions = append(out[i].Transitions, f.transitions[it.Type]...)
	}
	return out, nil
}
