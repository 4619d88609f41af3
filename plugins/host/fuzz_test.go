package host

import (
	"strings"
	"testing"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/pipeline"
	pb "github.com/writ-dev/writ/plugins/proto"
	"github.com/writ-dev/writ/schema/ir"
)

// fuzzCatalog declares one machine so transitions can be checked.
type fuzzCatalog struct{ ir.Catalog }

func (fuzzCatalog) Machine(name string) (*ir.Machine, bool) {
	if name != "job" {
		return nil, false
	}
	return &ir.Machine{Name: "job", States: []string{"PENDING", "RUNNING"}}, true
}

// FuzzConvert feeds arbitrary wire results (as a plugin could send them,
// packed with the batch codec) through the host's result decoding and
// check: it must never panic, and whatever it accepts must be a well-formed
// effect for the item.
func FuzzConvert(f *testing.F) {
	effect := func(result string, writes ...kv.Write) []byte {
		b := []byte{pb.TagEffect}
		b = pb.AppendUvarint(b, uint64(len(writes)))
		for _, w := range writes {
			b = pb.AppendWrite(b, w.Key, w.Value, w.Delete, w.IfRev)
		}
		b = pb.AppendBytes(b, []byte(result))
		return pb.AppendUvarint(b, 0)
	}
	transition := func(machine, key, to string) []byte {
		b := []byte{pb.TagEffect, 0, 0, 1}
		return pb.AppendTransition(b, machine, key, to)
	}
	need := func(keys ...string) []byte {
		b := pb.AppendUvarint([]byte{pb.TagNeedKeys}, uint64(len(keys)))
		for _, k := range keys {
			b = pb.AppendString(b, k)
		}
		return b
	}
	f.Add(effect(`{"ok":true}`, kv.Write{Key: "job/a", Value: []byte("{}"), IfRev: 3}))
	f.Add(effect("", kv.Write{Key: "job/b", Value: []byte("{}")}))
	f.Add(effect("", kv.Write{Key: "_m/job/a", Value: []byte("{}"), IfRev: 3}))
	f.Add(effect("", kv.Write{Key: "job/a", IfRev: 2}))
	f.Add(effect("", kv.Write{Key: "job/a", Delete: true, IfRev: 3}, kv.Write{Key: "job/a", IfRev: 3}))
	f.Add(need("worker/w1"))
	f.Add(need("job/a"))
	f.Add(transition("job", "x", "RUNNING"))
	f.Add(transition("job", "x", "NOPE"))
	f.Add(pb.AppendError(nil, pb.ErrorRule, "no"))
	f.Add(pb.AppendError(nil, 9, "?"))
	f.Add([]byte{7})
	h := &Host{cfg: Config{Catalog: fuzzCatalog{}}}
	inst := &instance{h: h, desc: description{name: "fuzz"}}
	it := &pipeline.EvalItem{Type: "job.submit", ID: "r", State: []kv.Record{{Key: "job/a", Value: []byte("{}"), Rev: 3}, {Key: "job/b"}}}
	f.Fuzz(func(t *testing.T, b []byte) {
		d := pb.NewDecoder(b, false)
		res := h.decodeResult(inst, it, d, &writeSlab{}, 1)
		if d.Err() != nil {
			return
		}
		if res.Err != nil {
			if res.Err.Kind < pipeline.EvalRule || res.Err.Kind > pipeline.EvalInternal {
				t.Fatalf("error kind %d out of range", res.Err.Kind)
			}
			if len(res.Effect.Writes)+len(res.NeedKeys)+len(res.Transitions) > 0 {
				t.Fatalf("an error result carries an effect: %+v", res)
			}
			return
		}
		if len(res.NeedKeys) > 0 && len(res.Effect.Writes)+len(res.Transitions) > 0 {
			t.Fatalf("NeedKeys with an effect: %+v", res)
		}
		seen := map[string]bool{}
		for _, w := range res.Effect.Writes {
			rec, ok := lookup(it.State, w.Key)
			if !ok || rec.Rev != w.IfRev || strings.HasPrefix(w.Key, "_") || seen[w.Key] || w.Unconditional {
				t.Fatalf("accepted a malformed write %+v", w)
			}
			seen[w.Key] = true
		}
		for _, tr := range res.Transitions {
			if tr.Machine != "job" || (tr.To != "PENDING" && tr.To != "RUNNING") || tr.Key == "" {
				t.Fatalf("accepted a malformed transition %+v", tr)
			}
		}
	})
}
