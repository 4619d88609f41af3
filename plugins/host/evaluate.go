package host

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/pipeline"
	pb "github.com/writ-dev/writ/plugins/proto"
)

// Evaluate implements pipeline.Evaluator: one Evaluate call per plugin for
// all the items it serves, concurrently across plugins. Results are
// positional. Per-item failures are typed EvalErrors; the returned error is
// non-nil only after Close.
func (h *Host) Evaluate(ctx context.Context, items []pipeline.EvalItem) ([]pipeline.EvalResult, error) {
	h.mu.RLock()
	closed := h.closed
	h.mu.RUnlock()
	if closed {
		return nil, ErrClosed
	}
	out := make([]pipeline.EvalResult, len(items))
	var groups map[*instance][]int
	var only *instance
	var onlyIdx []int
	for k := range items {
		inst := h.route[items[k].Type]
		if inst == nil {
			if _, declared := h.cfg.Catalog.Type(items[k].Type); !declared {
				out[k].Err = &pipeline.EvalError{Kind: pipeline.EvalValidation, Msg: fmt.Sprintf("entry type %q is not declared by the schema", items[k].Type)}
			} else {
				out[k].Err = &pipeline.EvalError{Kind: pipeline.EvalInternal, Msg: fmt.Sprintf("no plugin serves entry type %q (it is not evaluated by handlers)", items[k].Type)}
			}
			continue
		}
		switch {
		case only == nil:
			only = inst
			onlyIdx = append(onlyIdx, k)
		case only == inst && groups == nil:
			onlyIdx = append(onlyIdx, k)
		default:
			if groups == nil {
				groups = map[*instance][]int{only: onlyIdx}
			}
			groups[inst] = append(groups[inst], k)
		}
	}
	switch {
	case groups != nil:
		var wg sync.WaitGroup
		for inst, idxs := range groups {
			wg.Add(1)
			go func() {
				defer wg.Done()
				inst.call(ctx, items, idxs, out)
			}()
		}
		wg.Wait()
	case only != nil:
		only.call(ctx, items, onlyIdx, out)
	}
	return out, nil
}

// convert checks one plugin result against the item it answers and turns
// it into an EvalResult. Anything malformed is an internal error for that
// item only.
func (h *Host) convert(inst *instance, it *pipeline.EvalItem, r *pb.Result) pipeline.EvalResult {
	bad := func(format string, args ...any) pipeline.EvalResult {
		return pipeline.EvalResult{Err: &pipeline.EvalError{Kind: pipeline.EvalInternal,
			Msg: fmt.Sprintf("plugin %s: malformed result for %s %q: ", inst.label(), it.Type, it.ID) + fmt.Sprintf(format, args...)}}
	}
	if r == nil {
		return bad("no result")
	}
	if r.Error != nil {
		if len(r.Writes) > 0 || len(r.NeedKeys) > 0 || len(r.Transitions) > 0 {
			return bad("an error result also carries writes, need_keys or transitions")
		}
		var kind pipeline.EvalErrorKind
		msg := r.Error.Message
		switch r.Error.Kind {
		case pb.ErrorKind_ERROR_KIND_RULE:
			kind = pipeline.EvalRule
		case pb.ErrorKind_ERROR_KIND_VALIDATION:
			kind = pipeline.EvalValidation
		case pb.ErrorKind_ERROR_KIND_INTERNAL:
			kind = pipeline.EvalInternal
			msg = fmt.Sprintf("plugin %s: %s", inst.label(), msg)
		default:
			return bad("unknown error kind %d (message %q)", r.Error.Kind, r.Error.Message)
		}
		return pipeline.EvalResult{Err: &pipeline.EvalError{Kind: kind, Msg: msg}}
	}
	if len(r.NeedKeys) > 0 {
		if len(r.Writes) > 0 || len(r.Transitions) > 0 || len(r.Result) > 0 {
			return bad("need_keys together with an effect; ask for keys or answer, not both")
		}
		for _, k := range r.NeedKeys {
			if k == "" {
				return bad("need_keys holds an empty key")
			}
			if _, given := lookup(it.State, k); given {
				return bad("asks for key %q, which it was given", k)
			}
		}
		return pipeline.EvalResult{NeedKeys: append([]string(nil), r.NeedKeys...)}
	}
	res := pipeline.EvalResult{Result: r.Result}
	if len(r.Writes) > 0 {
		res.Effect.Writes = make([]kv.Write, len(r.Writes))
		for j, w := range r.Writes {
			if w == nil || w.Key == "" {
				return bad("write %d has no key", j)
			}
			if strings.HasPrefix(w.Key, "_") {
				return bad("writes reserved key %q (keys starting with \"_\" belong to writ)", w.Key)
			}
			if w.Delete && len(w.Value) > 0 {
				return bad("write to %q is a delete with a value", w.Key)
			}
			for _, prev := range r.Writes[:j] {
				if prev.Key == w.Key {
					return bad("writes key %q twice", w.Key)
				}
			}
			rec, given := lookup(it.State, w.Key)
			if !given {
				return bad("writes key %q, which it was not given (it must ask for it with need_keys)", w.Key)
			}
			if w.IfRev != rec.Rev {
				return bad("write to %q is guarded by revision %d, but the key is at revision %d in the state it was given", w.Key, w.IfRev, rec.Rev)
			}
			res.Effect.Writes[j] = kv.Write{Key: w.Key, Value: w.Value, Delete: w.Delete, IfRev: w.IfRev}
		}
	}
	if len(r.Transitions) > 0 {
		res.Transitions = make([]pipeline.Transition, len(r.Transitions))
		for j, t := range r.Transitions {
			if t == nil || t.Key == "" {
				return bad("transition %d has no instance key", j)
			}
			m, ok := h.cfg.Catalog.Machine(t.Machine)
			if !ok {
				return bad("transition names machine %q, which the schema does not declare", t.Machine)
			}
			if !m.HasState(t.To) {
				return bad("transition of %s %q to %q: machine %s has no such state", t.Machine, t.Key, t.To, t.Machine)
			}
			res.Transitions[j] = pipeline.Transition{Machine: t.Machine, Key: t.Key, To: t.To}
		}
	}
	return res
}

func lookup(state []kv.Record, key string) (kv.Record, bool) {
	for k := range state {
		if state[k].Key == key {
			return state[k], true
		}
	}
	return kv.Record{}, false
}
