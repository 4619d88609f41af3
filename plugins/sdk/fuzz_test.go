package sdk

import (
	"bytes"
	"context"
	"testing"

	"github.com/writ-dev/writ/kv"
	pb "github.com/writ-dev/writ/plugins/proto"
)

// FuzzServeEvaluate feeds arbitrary Evaluate requests to the plugin side:
// it must never panic, must answer every item positionally (the same with
// buffers reused from earlier inputs as with fresh ones), and every
// write it produces must be guarded by the revision it was given.
func FuzzServeEvaluate(f *testing.F) {
	type rec struct {
		key, value string
		rev        uint64
	}
	type item struct {
		typ, id, payload string
		state            []rec
	}
	seed := func(items ...item) {
		b := pb.AppendUvarint(nil, uint64(len(items)))
		for _, it := range items {
			b = pb.AppendItem(b, it.typ, it.id, []byte(it.payload), len(it.state))
			for _, r := range it.state {
				b = pb.AppendRecord(b, r.key, []byte(r.value), r.rev)
			}
		}
		f.Add(b)
	}
	seed(item{"copy", "a", `{"from":"x","to":"y"}`, []rec{{"x", "v", 4}, {"y", "", 0}}})
	seed(item{"copy", "", `{"from":"x","to":"_m/y"}`, []rec{{"x", "", 1}, {"_m/y", "", 0}}})
	seed(item{"copy", "", `{"from":"x","to":"y"}`, nil}, item{typ: "nope"})
	seed(item{"copy", "", `not json`, nil})
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
	// The inputs share one stream's buffers, as a stream's batches do.
	var stream streamScratch
	f.Fuzz(func(t *testing.T, b []byte) {
		items, err := decodeItems(b)
		if err != nil {
			return
		}
		resp, err := s.evaluate(context.Background(), &pb.EvaluateRequest{Items: b})
		if err != nil {
			t.Fatal(err)
		}
		reused, err := s.evaluateWith(context.Background(), &pb.EvaluateRequest{Items: b}, &stream)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(reused.Results, resp.Results) {
			t.Fatalf("a stream's reused buffers answer\n%q\nwhere fresh ones answer\n%q", reused.Results, resp.Results)
		}
		d := pb.NewDecoder(resp.Results, false)
		if n := d.Count("count", pb.MinResult); n != len(items) {
			t.Fatalf("%d results for %d items", n, len(items))
		}
		for i := range items {
			switch tag := d.Byte("tag"); tag {
			case pb.TagError:
				d.Byte("kind")
				d.String("msg")
			case pb.TagNeedKeys:
				for range d.Count("keys", 1) {
					d.String("key")
				}
			case pb.TagEffect:
				for range d.Count("writes", pb.MinWrite) {
					key, _, _, ifRev := d.String("key"), d.Byte("flags"), d.Bytes("value"), d.Uvarint("rev")
					var given *kv.Record
					for r := range items[i].State {
						if items[i].State[r].Key == key {
							given = &items[i].State[r]
							break
						}
					}
					if given == nil || given.Rev != ifRev || key == "" || key[0] == '_' {
						t.Fatalf("item %d: unguarded or reserved write to %q (if_rev %d)", i, key, ifRev)
					}
				}
				d.Bytes("result")
				for range d.Count("transitions", pb.MinTransition) {
					d.String("machine")
					d.String("key")
					d.String("to")
				}
			default:
				t.Fatalf("item %d: tag %d", i, tag)
			}
		}
		if err := d.Done(); err != nil {
			t.Fatalf("response: %v", err)
		}
	})
}
