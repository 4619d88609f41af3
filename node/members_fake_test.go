package node

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
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
func (f *fakeAgent) Promote(_ context.Context, id string) error {
	f.calls = append(f.calls, "promote "+id)
	return f.err
}

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
	if e, f, err := gossipKeys("", dir); e != "" || f != "" || err != nil {
		t.Fatalf("no key: want no encryption, got %q %q %v", e, f, err)
	}
	e, f, err := gossipKeys("OLD", dir)
	if e != "OLD" || f != filepath.Join(dir, "serf.keyring") || err != nil {
		t.Fatalf("first start: want the key and a keyring to create, got %q %q %v", e, f, err)
	}
	// membership creates the file; a rotation then rewrites it.
	if err := os.WriteFile(f, []byte(`["NEW"]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if e, f2, err := gossipKeys("OLD", dir); e != "" || f2 != f || err != nil {
		t.Fatalf("same gossip.key after a rotation: want the keyring authoritative, got %q %q %v", e, f2, err)
	}
	if b, _ := os.ReadFile(f); string(b) != `["NEW"]` {
		t.Fatalf("keyring rewritten although gossip.key did not change: %s", b)
	}
	// The operator hands the node another key: it becomes primary, the
	// others stay.
	if e, _, err := gossipKeys("NEWER", dir); e != "" || err != nil {
		t.Fatalf("changed gossip.key: %q %v", e, err)
	}
	var keys []string
	b, _ := os.ReadFile(f)
	if err := json.Unmarshal(b, &keys); err != nil || len(keys) != 2 || keys[0] != "NEWER" || keys[1] != "NEW" {
		t.Fatalf("changed gossip.key: want it first, the old keys kept: %s %v", b, err)
	}
	// Unchanged again: left alone.
	if err := os.WriteFile(f, []byte(`["X"]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := gossipKeys("NEWER", dir); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(f); string(b) != `["X"]` {
		t.Fatalf("keyring rewritten although gossip.key did not change: %s", b)
	}
	if err := os.WriteFile(f, []byte(`not json`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := gossipKeys("OTHER", dir); err == nil || !strings.Contains(err.Error(), "JSON array") {
		t.Fatalf("corrupt keyring: want an error naming the format, got %v", err)
	}
}
