package sdk

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/writ-dev/writ/plugins/proto"
)

// FuzzServeEvaluate feeds arbitrary Evaluate requests to the plugin side:
// it must never panic, must answer every item positionally, and every
// write it produces must be guarded by the revision it was given.
func FuzzServeEvaluate(f *testing.F) {
	seed := func(r *pb.EvaluateRequest) {
		b, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	seed(&pb.EvaluateRequest{Items: []*pb.Item{{Type: "copy", Id: "a", Payload: []byte(`{"from":"x","to":"y"}`),
		State: []*pb.Record{{Key: "x", Value: []byte("v"), Rev: 4}, {Key: "y"}}}}})
	seed(&pb.EvaluateRequest{Items: []*pb.Item{{Type: "copy", Payload: []byte(`{"from":"x","to":"_m/y"}`), State: []*pb.Record{{Key: "x", Rev: 1}, {Key: "_m/y"}}}}})
	seed(&pb.EvaluateRequest{Items: []*pb.Item{{Type: "copy", Payload: []byte(`{"from":"x","to":"y"}`)}, {Type: "nope"}}})
	seed(&pb.EvaluateRequest{Items: []*pb.Item{{Type: "copy", Payload: []byte(`not json`)}}})
	p := &Plugin{Name: "fuzz", Fingerprint: "fp", Handlers: map[string]Handler{
		"copy": HandlerFunc(func(ctx context.Context, c *Call) error {
			var in struct{ From, To string }
			if err := c.DecodePayload(&in); err != nil {
				return err
			}
			v, ok := c.Get(in.From)
			if !ok {
				c.Delete(in.To)
				return nil
			}
			c.Put(in.To, v)
			return nil
		}),
	}}
	s := &server{p: p}
	f.Fuzz(func(t *testing.T, b []byte) {
		var req pb.EvaluateRequest
		if proto.Unmarshal(b, &req) != nil {
			return
		}
		resp, err := s.Evaluate(context.Background(), &req)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Results) != len(req.Items) {
			t.Fatalf("%d results for %d items", len(resp.Results), len(req.Items))
		}
		for i, r := range resp.Results {
			for _, w := range r.Writes {
				var given *pb.Record
				for _, rec := range req.Items[i].State {
					if rec.Key == w.Key {
						given = rec
						break
					}
				}
				if given == nil || given.Rev != w.IfRev || w.Key == "" || w.Key[0] == '_' {
					t.Fatalf("item %d: unguarded or reserved write %+v", i, w)
				}
			}
		}
	})
}
