package host

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

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

// FuzzConvert feeds arbitrary wire results (as a plugin could send them)
// through the host's result check: it must never panic, and whatever it
// accepts must be a well-formed effect for the item.
func FuzzConvert(f *testing.F) {
	seed := func(r *pb.Result) {
		b, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	seed(&pb.Result{Writes: []*pb.Write{{Key: "job/a", Value: []byte("{}"), IfRev: 3}}, Result: []byte(`{"ok":true}`)})
	seed(&pb.Result{Writes: []*pb.Write{{Key: "job/b", Value: []byte("{}")}}})
	seed(&pb.Result{Writes: []*pb.Write{{Key: "_m/job/a", Value: []byte("{}"), IfRev: 3}}})
	seed(&pb.Result{Writes: []*pb.Write{{Key: "job/a", IfRev: 2}}})
	seed(&pb.Result{NeedKeys: []string{"worker/w1"}})
	seed(&pb.Result{NeedKeys: []string{"job/a"}})
	seed(&pb.Result{Transitions: []*pb.Transition{{Machine: "job", Key: "x", To: "RUNNING"}}})
	seed(&pb.Result{Transitions: []*pb.Transition{{Machine: "job", Key: "x", To: "NOPE"}}})
	seed(&pb.Result{Error: &pb.Error{Kind: pb.ErrorKind_ERROR_KIND_RULE, Message: "no"}})
	seed(&pb.Result{Error: &pb.Error{Kind: 9}})
	h := &Host{cfg: Config{Catalog: fuzzCatalog{}}}
	inst := &instance{h: h, desc: description{name: "fuzz"}}
	it := &pipeline.EvalItem{Type: "job.submit", ID: "r", State: []kv.Record{{Key: "job/a", Value: []byte("{}"), Rev: 3}, {Key: "job/b"}}}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r pb.Result
		if proto.Unmarshal(b, &r) != nil {
			return
		}
		res := h.convert(inst, it, &r)
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
