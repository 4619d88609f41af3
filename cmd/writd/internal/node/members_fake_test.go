package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/membership"
)

type fakeAgent struct {
	calls   []string
	err     error
	block   chan struct{}
	refused []membership.Refusal
}

func (f *fakeAgent) Refused() []membership.Refusal { return f.refused }
func (f *fakeAgent) op(name, key string) (membership.KeyReport, error) {
	if f.block != nil {
		<-f.block
	}
	f.calls = append(f.calls, name+" "+key)
	return membership.KeyReport{NumNodes: 2, NumResp: 2, Keys: map[string]int{key: 2}}, f.err
}
func (f *fakeAgent) InstallKey(k string) (membership.KeyReport, error) { return f.op("install", k) }
func (f *fakeAgent) UseKey(k string) (membership.KeyReport, error)     { return f.op("use", k) }
func (f *fakeAgent) RemoveKey(k string) (membership.KeyReport, error)  { return f.op("remove", k) }
func (f *fakeAgent) ListKeys() (membership.KeyReport, error)           { return f.op("list", "") }

func TestMembersAdapter_FakeAgent(t *testing.T) {
	since := time.Unix(1700000000, 0)
	a := &fakeAgent{refused: []membership.Refusal{{ID: "n4", Addr: "10.0.0.8:7072", RaftAddr: "10.0.0.8:7071", Fingerprint: "9f", Reason: "incompatible schema", Since: since}}}
	m := &members{a: a}
	ctx := context.Background()
	got := m.Refused(ctx)
	want := api.Refusal{ID: "n4", GossipAddr: "10.0.0.8:7072", RaftAddr: "10.0.0.8:7071", Fingerprint: "9f", Reason: "incompatible schema", Since: since}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("refusals: got %+v want %+v", got, want)
	}
	for _, op := range []api.KeyOp{api.KeyInstall, api.KeyUse, api.KeyRemove, api.KeyList} {
		rep, err := m.Keyring(ctx, op, "K")
		if err != nil || rep.NumResp != 2 || rep.NumNodes != 2 {
			t.Fatalf("%v: %+v %v", op, rep, err)
		}
	}
	if want := []string{"install K", "use K", "remove K", "list "}; len(a.calls) != 4 || a.calls[0] != want[0] || a.calls[1] != want[1] || a.calls[2] != want[2] || a.calls[3] != want[3] {
		t.Fatalf("agent calls: %q, want %q", a.calls, want)
	}

	a.err = membership.ErrNotEncrypted
	if _, err := m.Keyring(ctx, api.KeyList, ""); !errors.Is(err, api.ErrNotEncrypted) {
		t.Fatalf("not encrypted: got %v", err)
	}

	a.err, a.block = nil, make(chan struct{})
	defer close(a.block)
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := m.Keyring(tctx, api.KeyList, ""); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow agent: want deadline exceeded, got %v", err)
	}
}

func TestGossipKeys(t *testing.T) {
	dir := t.TempDir()
	if e, f := gossipKeys("", dir); e != "" || f != "" {
		t.Fatalf("no key: want no encryption, got %q %q", e, f)
	}
	e, f := gossipKeys("K", dir)
	if e != "K" || f != filepath.Join(dir, "serf.keyring") {
		t.Fatalf("first start: want the key and a keyring to create, got %q %q", e, f)
	}
	if err := os.WriteFile(f, []byte(`["x"]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if e, f2 := gossipKeys("K", dir); e != "" || f2 != f {
		t.Fatalf("keyring exists: want it authoritative, got %q %q", e, f2)
	}
}
