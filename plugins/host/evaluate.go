package host

import (
	"context"
	"fmt"
	"sync"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/pipeline"
	pb "github.com/writ-dev/writ/plugins/proto"
)

// Evaluate implements pipeline.Evaluator: one batch per plugin for all the
// items it serves, concurrently across plugins. Results are
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
			onlyIdx = make([]int, 0, len(items)-k)
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

// failItems answers every item at idxs with the same error.
func failItems(out []pipeline.EvalResult, idxs []int, e *pipeline.EvalError) {
	for _, k := range idxs {
		out[k] = pipeline.EvalResult{Err: e}
	}
}

// bufPool recycles request encoding buffers.
var bufPool = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledBuf bounds the buffers kept for reuse.
const maxPooledBuf = 1 << 20

// encodeItems packs the items at idxs with pluginproto's batch codec into a
// pooled buffer; release it with releaseBuf once the request is sent.
func encodeItems(items []pipeline.EvalItem, idxs []int) *[]byte {
	size := 8
	for _, k := range idxs {
		it := &items[k]
		size += 16 + len(it.Type) + len(it.ID) + len(it.Payload)
		for s := range it.State {
			size += 16 + len(it.State[s].Key) + len(it.State[s].Value)
		}
	}
	buf := bufPool.Get().(*[]byte)
	b := *buf
	if cap(b) < size {
		b = make([]byte, 0, size)
	}
	b = pb.AppendUvarint(b[:0], uint64(len(idxs)))
	for _, k := range idxs {
		it := &items[k]
		b = pb.AppendItem(b, it.Type, it.ID, it.Payload, len(it.State))
		for s := range it.State {
			r := &it.State[s]
			b = pb.AppendRecord(b, r.Key, r.Value, r.Rev)
		}
	}
	*buf = b
	return buf
}

func releaseBuf(buf *[]byte) {
	if cap(*buf) <= maxPooledBuf {
		*buf = (*buf)[:0]
		bufPool.Put(buf)
	}
}

// decodeResults decodes a packed response (one result per item at idxs,
// positionally) and checks every result against its item, filling out.
// A response that cannot be decoded fails every item of the batch.
func (h *Host) decodeResults(inst *instance, items []pipeline.EvalItem, idxs []int, b []byte, out []pipeline.EvalResult) {
	d := pb.NewDecoder(b, false)
	n := d.Count("result count", pb.MinResult)
	if d.Err() == nil && n != len(idxs) {
		e := &pipeline.EvalError{Kind: pipeline.EvalInternal, Msg: fmt.Sprintf("plugin %s: returned %d results for %d items", inst.label(), n, len(idxs))}
		failItems(out, idxs, e)
		return
	}
	var slab writeSlab
	for j, k := range idxs {
		out[k] = h.decodeResult(inst, &items[k], d, &slab, len(idxs)-j)
		if d.Err() != nil {
			break
		}
	}
	if err := d.Done(); err != nil {
		// A truncated answer, an unknown tag or trailing bytes mean the
		// plugin and the host disagree about the wire format: trust none
		// of the batch's results.
		e := &pipeline.EvalError{Kind: pipeline.EvalInternal, Msg: fmt.Sprintf("plugin %s: undecodable response: %v", inst.label(), err)}
		failItems(out, idxs, e)
		return
	}
	detach(out, idxs)
}

// writeSlab hands out the write slices of one response's results from a
// few shared allocations.
type writeSlab struct{ free []kv.Write }

// take returns an empty slice with room for n writes; left is the number of
// results still to decode, to size the next allocation.
func (s *writeSlab) take(n, left int) []kv.Write {
	if cap(s.free)-len(s.free) < n {
		s.free = make([]kv.Write, 0, max(n, left))
	}
	w := s.free[len(s.free) : len(s.free) : len(s.free)+n]
	s.free = s.free[:len(s.free)+n]
	return w
}

// decodeResult reads one result from d, checks it against the item it
// answers and turns it into an EvalResult. Anything malformed is an
// internal error for that item only; the result is read to its end either
// way so the next one decodes. Values and the result document alias the
// response until decodeResults detaches them.
func (h *Host) decodeResult(inst *instance, it *pipeline.EvalItem, d *pb.Decoder, slab *writeSlab, left int) pipeline.EvalResult {
	var problem string
	bad := func(format string, args ...any) {
		if problem == "" {
			problem = fmt.Sprintf(format, args...)
		}
	}
	var res pipeline.EvalResult
	switch tag := d.Byte("result tag"); tag {
	case pb.TagError:
		kind, msg := d.Byte("error kind"), d.String("error message")
		switch kind {
		case pb.ErrorRule:
			res.Err = &pipeline.EvalError{Kind: pipeline.EvalRule, Msg: msg}
		case pb.ErrorValidation:
			res.Err = &pipeline.EvalError{Kind: pipeline.EvalValidation, Msg: msg}
		case pb.ErrorInternal:
			res.Err = &pipeline.EvalError{Kind: pipeline.EvalInternal, Msg: fmt.Sprintf("plugin %s: %s", inst.label(), msg)}
		default:
			bad("unknown error kind %d (message %q)", kind, msg)
		}
	case pb.TagNeedKeys:
		n := d.Count("need_keys count", pb.MinString)
		if n == 0 {
			bad("need_keys result names no key")
		}
		res.NeedKeys = make([]string, 0, n)
		for range n {
			k := d.String("need key")
			switch {
			case d.Err() != nil:
			case k == "":
				bad("need_keys holds an empty key")
			default:
				if _, given := lookup(it.State, k); given {
					bad("asks for key %q, which it was given", k)
				}
			}
			res.NeedKeys = append(res.NeedKeys, k)
		}
	case pb.TagEffect:
		if n := d.Count("write count", pb.MinWrite); n > 0 {
			res.Effect.Writes = slab.take(n, left)
			for j := range n {
				key, flags := d.Bytes("write key"), d.Byte("write flags")
				value, ifRev := d.Bytes("write value"), d.Uvarint("write if_rev")
				if d.Err() != nil || problem != "" {
					continue
				}
				del := flags&pb.FlagDelete != 0
				rec, given := lookupBytes(it.State, key)
				switch {
				case len(key) == 0:
					bad("write %d has no key", j)
				case key[0] == '_':
					bad("writes reserved key %q (keys starting with \"_\" belong to writ)", key)
				case flags&^pb.FlagDelete != 0:
					bad("write to %q has unknown flags %#x", key, flags)
				case del && len(value) > 0:
					bad("write to %q is a delete with a value", key)
				case !given:
					bad("writes key %q, which it was not given (it must ask for it with need_keys)", key)
				case ifRev != rec.Rev:
					bad("write to %q is guarded by revision %d, but the key is at revision %d in the state it was given", key, ifRev, rec.Rev)
				}
				for _, prev := range res.Effect.Writes {
					if prev.Key == string(key) {
						bad("writes key %q twice", key)
					}
				}
				res.Effect.Writes = append(res.Effect.Writes, kv.Write{Key: rec.Key, Value: value, Delete: del, IfRev: ifRev})
			}
		}
		res.Result = d.Bytes("result")
		if n := d.Count("transition count", pb.MinTransition); n > 0 {
			res.Transitions = make([]pipeline.Transition, 0, n)
			for j := range n {
				machine, key, to := d.String("transition machine"), d.String("transition key"), d.String("transition to")
				if d.Err() != nil || problem != "" {
					continue
				}
				if key == "" {
					bad("transition %d has no instance key", j)
					continue
				}
				m, ok := h.cfg.Catalog.Machine(machine)
				if !ok {
					bad("transition names machine %q, which the schema does not declare", machine)
					continue
				}
				if !m.HasState(to) {
					bad("transition of %s %q to %q: machine %s has no such state", machine, key, to, machine)
					continue
				}
				res.Transitions = append(res.Transitions, pipeline.Transition{Machine: m.Name, Key: key, To: to})
			}
		}
	default:
		d.Invalid(fmt.Sprintf("result tag %d", tag))
	}
	if problem != "" {
		return pipeline.EvalResult{Err: &pipeline.EvalError{Kind: pipeline.EvalInternal,
			Msg: fmt.Sprintf("plugin %s: malformed result for %s %q: %s", inst.label(), it.Type, it.ID, problem)}}
	}
	return res
}

// detach copies the values and result documents of the results at idxs,
// which alias the response, into one allocation for the batch, so that they
// do not pin the response (keys, framing, error messages) and the batch
// costs one allocation instead of one per result. The results of a batch
// then share that arena; it is as large as their values.
func detach(out []pipeline.EvalResult, idxs []int) {
	n := 0
	for _, k := range idxs {
		n += len(out[k].Result)
		for _, w := range out[k].Effect.Writes {
			n += len(w.Value)
		}
	}
	if n == 0 {
		return
	}
	arena := make([]byte, 0, n)
	clone := func(b []byte) []byte {
		if len(b) == 0 {
			return nil
		}
		lo := len(arena)
		arena = append(arena, b...)
		return arena[lo:len(arena):len(arena)]
	}
	for _, k := range idxs {
		res := &out[k]
		for j := range res.Effect.Writes {
			res.Effect.Writes[j].Value = clone(res.Effect.Writes[j].Value)
		}
		res.Result = clone(res.Result)
	}
}

func lookup(state []kv.Record, key string) (kv.Record, bool) {
	for k := range state {
		if state[k].Key == key {
			return state[k], true
		}
	}
	return kv.Record{}, false
}

func lookupBytes(state []kv.Record, key []byte) (kv.Record, bool) {
	for k := range state {
		if state[k].Key == string(key) {
			return state[k], true
		}
	}
	return kv.Record{}, false
}
