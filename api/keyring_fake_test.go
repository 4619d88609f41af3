package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/writ-dev/writ/api/writv1"
)

// fakeMembership keeps one keyring for a pretend 3-node cluster.
type fakeMembership struct {
	mu      sync.Mutex
	keys    map[string]bool
	primary string
	calls   []string
	refused []Refusal
}

func (f *fakeMembership) Refused(context.Context) []Refusal { return f.refused }

func (f *fakeMembership) Keyring(_ context.Context, op KeyOp, key string) (KeyReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, op.String()+" "+key)
	rep := KeyReport{NumNodes: 3, NumResp: 3}
	switch op {
	case KeyInstall:
		f.keys[key] = true
	case KeyUse:
		f.primary = key
	case KeyRemove:
		delete(f.keys, key)
	case KeyList:
		rep.Keys, rep.PrimaryKeys = map[string]int{}, map[string]int{f.primary: 3}
		for k := range f.keys {
			rep.Keys[k] = 3
		}
	}
	return rep, nil
}

func key(b byte, n int) string {
	k := make([]byte, n)
	for i := range k {
		k[i] = b
	}
	return base64.StdEncoding.EncodeToString(k)
}

func TestKeyring_FakeMembership(t *testing.T) {
	old, nw := key(1, 32), key(2, 16)
	m := &fakeMembership{keys: map[string]bool{old: true}, primary: old}
	f := &fakeNode{id: "n1", leader: true}
	s, err := New(Config{Writer: f, Store: f, Info: f, Membership: m})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	call := func(op KeyOp, k string) (*writv1.KeyringResponse, error) {
		return s.Keyring(ctx, &writv1.KeyringRequest{Op: op, Key: k})
	}
	wantErr := func(err error, code codes.Code, contains ...string) {
		t.Helper()
		st, _ := status.FromError(err)
		if err == nil || st.Code() != code {
			t.Fatalf("want %v, got %v", code, err)
		}
		for _, c := range contains {
			if !strings.Contains(st.Message(), c) {
				t.Fatalf("error %q does not mention %q", st.Message(), c)
			}
		}
	}

	_, err = call(KeyInstall, "no*base64")
	wantErr(err, codes.InvalidArgument, "key", "not valid base64", "head -c 32 /dev/urandom | base64")
	_, err = call(KeyUse, base64.StdEncoding.EncodeToString([]byte("12345")))
	wantErr(err, codes.InvalidArgument, "5 bytes", "16, 24 or 32")
	_, err = call(KeyRemove, "")
	wantErr(err, codes.InvalidArgument, "key is required")
	_, err = call(writv1.KeyringRequest_OP_UNSPECIFIED, old)
	wantErr(err, codes.InvalidArgument, "op")
	if len(m.calls) != 0 {
		t.Fatalf("bad input reached the agent: %v", m.calls)
	}

	if r, err := call(KeyInstall, nw); err != nil || r.NumResp != 3 || r.Op != KeyInstall {
		t.Fatalf("install: %v %v", r, err)
	}
	_, err = call(KeyRemove, old)
	wantErr(err, codes.FailedPrecondition, "primary key", "3 of 3 nodes", "writctl keyring use")
	if !m.keys[old] {
		t.Fatal("the primary key was removed")
	}
	if _, err := call(KeyUse, nw); err != nil {
		t.Fatal(err)
	}
	if _, err := call(KeyRemove, old); err != nil {
		t.Fatal(err)
	}
	r, err := call(KeyList, "")
	fp := KeyFingerprint(nw)
	if err != nil || len(r.Keys) != 1 || r.Keys[fp] != 3 || r.PrimaryKeys[fp] != 3 {
		t.Fatalf("list after rotation: want fingerprint %s on 3 nodes: %v %v", fp, r, err)
	}
	raw, err := proto.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := base64.StdEncoding.DecodeString(nw)
	if bytes.Contains(raw, []byte(nw)) || bytes.Contains(raw, kb) {
		t.Fatalf("keyring list carries key material: %q", raw)
	}
}

func TestKeyFingerprint(t *testing.T) {
	k := key(7, 32)
	fp := KeyFingerprint(k)
	sum := sha256.Sum256(bytes.Repeat([]byte{7}, 32))
	if fp != hex.EncodeToString(sum[:8]) || len(fp) != 16 {
		t.Fatalf("fingerprint %q: want the first 8 bytes of the SHA-256 of the decoded key", fp)
	}
	if KeyFingerprint(" "+k+"\n") != fp || KeyFingerprint(key(8, 32)) == fp {
		t.Fatal("fingerprint: surrounding space must not matter, different keys must differ")
	}
}

func TestKeyring_FakeNoMembership(t *testing.T) {
	f := &fakeNode{id: "n1", leader: true}
	s, err := New(Config{Writer: f, Store: f, Info: f})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Keyring(context.Background(), &writv1.KeyringRequest{Op: KeyList})
	if st, _ := status.FromError(err); st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), "gossip.key") {
		t.Fatalf("want FailedPrecondition naming gossip.key, got %v", err)
	}
}

func TestMembers_FakeRefusals(t *testing.T) {
	since := time.Unix(1700000000, 0)
	m := &fakeMembership{refused: []Refusal{{ID: "n9", GossipAddr: "10.0.0.9:7072", RaftAddr: "10.0.0.9:7071", Fingerprint: "9f", Reason: "incompatible schema: differs", Since: since}}}
	f := &fakeNode{id: "n1", leader: true}
	s, err := New(Config{Writer: f, Store: f, Info: f, Membership: m})
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Members(context.Background(), &writv1.MembersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Refused) != 1 {
		t.Fatalf("want 1 refusal, got %v", r.Refused)
	}
	x := r.Refused[0]
	if x.Id != "n9" || x.GossipAddr != "10.0.0.9:7072" || x.RaftAddr != "10.0.0.9:7071" || x.SchemaFingerprint != "9f" || x.Reason != "incompatible schema: differs" || x.SinceUnixMs != since.UnixMilli() {
		t.Fatalf("refusal mapped wrongly: %v", x)
	}
}

type refusingNode struct{ *fakeNode }

func (refusingNode) Members(context.Context) []MemberInfo {
	return []MemberInfo{{ID: "n1", Role: "voter", Status: "alive"}, {ID: "n9", Status: "alive", Refused: "incompatible schema: differs"}}
}

func TestMembers_FakeRefusedMemberField(t *testing.T) {
	f := refusingNode{&fakeNode{id: "n1", leader: true}}
	s, err := New(Config{Writer: f, Store: f, Info: f})
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Members(context.Background(), &writv1.MembersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Members) != 2 || r.Members[0].Refused != "" || r.Members[1].Refused != "incompatible schema: differs" || r.Members[1].Status != "alive" {
		t.Fatalf("refused field mapped wrongly: %v", r.Members)
	}
}

func (f *fakeMembership) Promote(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "promote "+id)
	return nil
}
