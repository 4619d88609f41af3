package host

import (
	"strings"
	"testing"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/pipeline"
	pb "github.com/writ-dev/writ/plugins/proto"
)

// TestDecodeResultsBatchFailures: an answer the host cannot trust as a
// whole (wrong result count, truncated, trailing bytes) is an internal
// error for every item of the batch, while one malformed result among good
// ones fails only its own item.
func TestDecodeResultsBatchFailures(t *testing.T) {
	h := &Host{cfg: Config{Catalog: fuzzCatalog{}}}
	inst := &instance{h: h, desc: description{name: "dec"}}
	items := []pipeline.EvalItem{
		{Type: "job.submit", ID: "a", State: []kv.Record{{Key: "job/a"}}},
		{Type: "job.submit", ID: "b", State: []kv.Record{{Key: "job/b", Value: []byte("{}"), Rev: 2}}},
	}
	idxs := []int{0, 1}
	good := func(key string, rev uint64) []byte {
		b := []byte{pb.TagEffect, 1}
		b = pb.AppendWrite(b, key, []byte(`{"v":1}`), false, rev)
		return append(pb.AppendBytes(b, nil), 0)
	}
	batch := func(results ...[]byte) []byte {
		b := pb.AppendUvarint(nil, uint64(len(results)))
		for _, r := range results {
			b = append(b, r...)
		}
		return b
	}
	ok := batch(good("job/a", 0), good("job/b", 2))
	for _, tc := range []struct {
		name string
		resp []byte
		want string // "" = both items succeed
	}{
		{"well formed", ok, ""},
		{"wrong count", batch(good("job/a", 0)), "returned 1 results for 2 items"},
		{"truncated", ok[:len(ok)-3], "undecodable response"},
		{"trailing bytes", append(append([]byte(nil), ok...), 7), "undecodable response"},
		{"unknown tag", batch(good("job/a", 0), []byte{9}), "undecodable response"},
	} {
		out := make([]pipeline.EvalResult, 2)
		h.decodeResults(inst, items, idxs, tc.resp, out)
		for k, r := range out {
			switch {
			case tc.want == "" && (r.Err != nil || len(r.Effect.Writes) != 1 || r.Effect.Writes[0].Key != items[k].State[0].Key):
				t.Errorf("%s: item %d: %+v (err %v)", tc.name, k, r, r.Err)
			case tc.want != "" && (r.Err == nil || r.Err.Kind != pipeline.EvalInternal || !strings.Contains(r.Err.Msg, tc.want)):
				t.Errorf("%s: item %d: want an internal error containing %q, got %+v (err %v)", tc.name, k, tc.want, r, r.Err)
			}
		}
	}

	// A write guarded by the wrong revision fails only its own item.
	out := make([]pipeline.EvalResult, 2)
	h.decodeResults(inst, items, idxs, batch(good("job/a", 5), good("job/b", 2)), out)
	if out[0].Err == nil || !strings.Contains(out[0].Err.Msg, "guarded by revision 5") {
		t.Errorf("item 0: %+v", out[0])
	}
	if out[1].Err != nil || len(out[1].Effect.Writes) != 1 {
		t.Errorf("item 1 must be unaffected: %+v (err %v)", out[1], out[1].Err)
	}

	// Values are copied out of the response.
	resp := batch(good("job/a", 0), good("job/b", 2))
	h.decodeResults(inst, items, idxs, resp, out)
	for i := range resp {
		resp[i] = 0
	}
	if string(out[0].Effect.Writes[0].Value) != `{"v":1}` {
		t.Errorf("a decoded value aliases the response: %q", out[0].Effect.Writes[0].Value)
	}
}

// TestDecodeResultsSmallestResult: an error with an empty message is three
// bytes, the smallest result; a batch of such results is not mistaken for
// a count the response cannot hold.
func TestDecodeResultsSmallestResult(t *testing.T) {
	h := &Host{cfg: Config{Catalog: fuzzCatalog{}}}
	inst := &instance{h: h, desc: description{name: "dec"}}
	items := []pipeline.EvalItem{{Type: "job.submit", ID: "a"}}
	resp := pb.AppendError(pb.AppendUvarint(nil, 1), pb.ErrorRule, "")
	out := make([]pipeline.EvalResult, 1)
	h.decodeResults(inst, items, []int{0}, resp, out)
	if out[0].Err == nil || out[0].Err.Kind != pipeline.EvalRule {
		t.Fatalf("want the rule error, got %+v (err %v)", out[0], out[0].Err)
	}
}
