package sdk_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/writ-dev/writ/internal/depcheck"
	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/plugins/sdk"
	"github.com/writ-dev/writ/plugins/sdk/sdktest"
)

// TestImportRules enforces DESIGN.md: the SDK drags in no host side, no
// consensus, gossip, schema compiler or configuration library.
func TestImportRules(t *testing.T) {
	forbidden := []string{
		"github.com/writ-dev/writ/plugins/host",
		"github.com/writ-dev/writ/raftstore",
		"github.com/writ-dev/writ/membership",
		"github.com/writ-dev/writ/schema/load",
		"github.com/spf13/viper",
		"go.etcd.io/raft",
		"go.etcd.io/etcd",
		"github.com/hashicorp/serf",
		"github.com/hashicorp/memberlist",
		"cuelang.org/go",
	}
	depcheck.Forbid(t, "github.com/writ-dev/writ/plugins/sdk", forbidden...)
	depcheck.Forbid(t, "github.com/writ-dev/writ/plugins/sdk/sdktest", forbidden...)
}

type counter struct {
	N int `json:"n"`
}

func testPlugin() *sdk.Plugin {
	return &sdk.Plugin{
		Name:        "test",
		Version:     "0.0.1",
		Fingerprint: "fp-test",
		Handlers: map[string]sdk.Handler{
			// incr: counter/<name> += 1, creating it at 1.
			"incr": sdk.HandlerFunc(func(ctx context.Context, c *sdk.Call) error {
				var p struct{ Name string }
				if err := c.DecodePayload(&p); err != nil {
					return err
				}
				if p.Name == "" {
					return sdk.Invalid("name", "required; give the counter's name")
				}
				var cur counter
				if _, err := c.GetJSON("counter/"+p.Name, &cur); err != nil {
					return err
				}
				cur.N++
				return c.PutJSON("counter/"+p.Name, cur)
			}),
			"refuse": sdk.HandlerFunc(func(ctx context.Context, c *sdk.Call) error {
				return sdk.Rule("always refused")
			}),
			"plain-error": sdk.HandlerFunc(func(ctx context.Context, c *sdk.Call) error {
				return errors.New("disk on fire")
			}),
			"panic": sdk.HandlerFunc(func(ctx context.Context, c *sdk.Call) error {
				var xs []int
				i := len(c.ID) + 3
				return sdk.Rule("unreachable %d", xs[i]) // index out of range panics
			}),
			"reserved": sdk.HandlerFunc(func(ctx context.Context, c *sdk.Call) error {
				c.Put("_m/job/x", []byte(`{"state":"RUNNING"}`))
				return nil
			}),
			"machine": sdk.HandlerFunc(func(ctx context.Context, c *sdk.Call) error {
				st, ord, ok := c.MachineState("job", "j1")
				if !ok {
					return sdk.Rule("job j1 does not exist")
				}
				c.Transition("worker", "w1", st)
				return c.SetResult(map[string]any{"state": st, "order": ord})
			}),
		},
	}
}

func TestGuardedWritesByConstruction(t *testing.T) {
	h := sdktest.New(t, testPlugin())
	// Absent key: write must require absence.
	r := h.Eval("incr", "r1", map[string]string{"Name": "a"}, sdktest.Absent("counter/a"))
	w, ok := sdktest.Written(r, "counter/a")
	if !ok || w.IfRev != 0 || string(w.Value) != `{"n":1}` {
		t.Fatalf("create: got %+v (err %v)", r, r.Err)
	}
	// Present key at revision 7: write must be guarded by 7.
	r = h.Eval("incr", "r2", map[string]string{"Name": "a"}, sdktest.Doc(t, "counter/a", 7, counter{N: 4}))
	w, ok = sdktest.Written(r, "counter/a")
	if !ok || w.IfRev != 7 || string(w.Value) != `{"n":5}` {
		t.Fatalf("update: got %+v (err %v)", r, r.Err)
	}
}

func TestUnknownKeyBecomesNeedKeys(t *testing.T) {
	h := sdktest.New(t, testPlugin())
	r := h.Eval("incr", "r1", map[string]string{"Name": "b"})
	if len(r.Writes) != 0 || r.Err != nil || len(r.NeedKeys) != 1 || r.NeedKeys[0] != "counter/b" {
		t.Fatalf("want NeedKeys [counter/b] only, got %+v", r)
	}
}

func TestErrorKinds(t *testing.T) {
	h := sdktest.New(t, testPlugin())
	cases := []struct {
		typ, payload string
		kind         sdk.ErrorKind
		msg          string
	}{
		{"refuse", `{}`, sdk.KindRule, "always refused"},
		{"plain-error", `{}`, sdk.KindInternal, "disk on fire"},
		{"incr", `{"Name":""}`, sdk.KindValidation, `field "name"`},
		{"incr", `{not json`, sdk.KindValidation, "payload"},
		{"panic", `{}`, sdk.KindInternal, "panicked"},
		{"reserved", `{}`, sdk.KindInternal, "reserved"},
		{"nope", `{}`, sdk.KindInternal, "does not serve"},
	}
	for _, c := range cases {
		r := h.Eval(c.typ, "id", []byte(c.payload))
		if r.Err == nil || r.Err.Kind != c.kind || !strings.Contains(r.Err.Msg, c.msg) {
			t.Errorf("%s %s: want %v error containing %q, got %+v", c.typ, c.payload, c.kind, c.msg, r)
		}
		if len(r.Writes) != 0 {
			t.Errorf("%s: an error result must carry no writes, got %v", c.typ, r.Writes)
		}
	}
}

func TestPanicAffectsOnlyItsItem(t *testing.T) {
	h := sdktest.New(t, testPlugin())
	rs := h.Batch(
		sdk.Item{Type: "incr", Payload: []byte(`{"Name":"a"}`), State: []kv.Record{sdktest.Absent("counter/a")}},
		sdk.Item{Type: "panic", Payload: []byte(`{}`)},
		sdk.Item{Type: "incr", Payload: []byte(`{"Name":"b"}`), State: []kv.Record{sdktest.Absent("counter/b")}},
	)
	if rs[0].Err != nil || len(rs[0].Writes) != 1 || rs[2].Err != nil || len(rs[2].Writes) != 1 {
		t.Fatalf("neighbours of a panicking item were affected: %+v", rs)
	}
	if rs[1].Err == nil || rs[1].Err.Kind != sdk.KindInternal {
		t.Fatalf("panicking item: want internal error, got %+v", rs[1])
	}
}

func TestMachineStateAndTransitions(t *testing.T) {
	h := sdktest.New(t, testPlugin())
	r := h.Eval("machine", "id", `{}`, sdktest.Machine("job", "j1", "RUNNING", 3, 9))
	if r.Err != nil || string(r.Result) != `{"order":3,"state":"RUNNING"}` {
		t.Fatalf("got %+v", r)
	}
	if len(r.Transitions) != 1 || r.Transitions[0] != (sdk.Transition{Machine: "worker", Key: "w1", To: "RUNNING"}) {
		t.Fatalf("transitions: %+v", r.Transitions)
	}
	r = h.Eval("machine", "id", `{}`, kv.Record{Key: "_m/job/j1"})
	if r.Err == nil || r.Err.Kind != sdk.KindRule {
		t.Fatalf("absent instance: want rule error, got %+v", r)
	}
	r = h.Eval("machine", "id", `{}`)
	if len(r.NeedKeys) != 1 || r.NeedKeys[0] != "_m/job/j1" {
		t.Fatalf("unknown machine record: want NeedKeys, got %+v", r)
	}
}

func TestStoreAppliesWithCAS_FakeStore(t *testing.T) {
	h := sdktest.New(t, testPlugin())
	s := sdktest.NewStore()
	for i := 0; i < 3; i++ {
		r := h.Eval("incr", "r", `{"Name":"c"}`, s.State("counter/c")...)
		if err := s.Apply(r); err != nil {
			t.Fatal(err)
		}
	}
	stale := h.Eval("incr", "r", `{"Name":"c"}`, sdktest.Absent("counter/c"))
	if err := s.Apply(stale); err == nil {
		t.Fatal("a write guarded by a stale revision applied")
	}
	rec, _ := s.Get("counter/c")
	if string(rec.Value) != `{"n":3}` {
		t.Fatalf("counter/c = %s, want n=3", rec.Value)
	}
}

func TestCheckRejectsBadDeclarations(t *testing.T) {
	for _, p := range []*sdk.Plugin{
		{Fingerprint: "x", Handlers: map[string]sdk.Handler{"a": sdk.HandlerFunc(nil)}},
		{Name: "n", Fingerprint: "x"},
		{Name: "n", Handlers: map[string]sdk.Handler{"a": sdk.HandlerFunc(nil)}},
		{Name: "n", Fingerprint: "x", Handlers: map[string]sdk.Handler{"a": nil}},
	} {
		if err := p.Check(); err == nil {
			t.Errorf("Check accepted %+v", p)
		}
	}
}
