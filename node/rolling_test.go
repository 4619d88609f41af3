package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/membership"
	"github.com/writ-dev/writ/schema/ir"
	"github.com/writ-dev/writ/schema/runtimecat"
)

// rollSchema is a tiny schema with the given request types (type numbers
// by position, from 1).
func rollSchema(types ...string) *ir.Schema {
	s := &ir.Schema{Package: "roll"}
	for i, name := range types {
		s.Entries = append(s.Entries, &ir.Entry{Name: name, Number: uint32(i + 1), Class: ir.ClassRequest, Keys: []string{"k/{id}"},
			Fields: []*ir.Field{{Name: "id", Kind: ir.KindString}}})
	}
	return s
}

func rollSchemas(t *testing.T, s *ir.Schema) *schemas {
	t.Helper()
	cat, err := runtimecat.New(s)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := newSchemas(cat)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

var (
	rollV1 = rollSchema("a.x")
	rollV2 = rollSchema("a.x", "a.y")
	rollV3 = rollSchema() // a.x removed: BLOCKED
)

// TestSchemas_CheckLocal: a restart in place may move forward (v1 → v2)
// but not to a schema that drops a type the data directory's last schema
// declared (v2 → v1, v2 → v3); the refusal names the code and the fix.
func TestSchemas_CheckLocal(t *testing.T) {
	dir := t.TempDir()
	start := func(s *ir.Schema) error {
		sc := rollSchemas(t, s)
		if err := sc.checkLocal(dir); err != nil {
			return err
		}
		return sc.recordLocal(dir)
	}
	if err := start(rollV1); err != nil {
		t.Fatalf("first start: %v", err)
	}
	if err := start(rollV2); err != nil {
		t.Fatalf("v1 → v2: %v", err)
	}
	for name, s := range map[string]*ir.Schema{"v2 → v1": rollV1, "v2 → v3": rollV3} {
		err := start(s)
		if err == nil || !strings.Contains(err.Error(), ir.CodeCompatTypeRemoved) || !strings.Contains(err.Error(), "fix:") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("%s: %v, want one line naming %s and the fix", name, err, ir.CodeCompatTypeRemoved)
		}
	}
	// the refused starts left the record alone
	if err := start(rollV2); err != nil {
		t.Fatalf("v2 again: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, schemaFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := rollSchemas(t, rollV2).checkLocal(dir); err == nil || !strings.Contains(err.Error(), schemaFile) {
		t.Fatalf("corrupt record: %v", err)
	}
}

// TestSchemas_AdmitAndGate_FakeView: admission judges a candidate against
// what the peers run; the ingress gate refuses a type a member's schema
// lacks and accepts it once every member declares it. The models are
// preloaded and the membership view is a fake; real nodes exchange models
// over the Schema RPC in cmd/writd's rolling tests.
func TestSchemas_AdmitAndGate_FakeView(t *testing.T) {
	s := rollSchemas(t, rollV2)
	fp1, fp2, fp3 := rollV1.Fingerprint(), rollV2.Fingerprint(), rollV3.Fingerprint()
	s.byFP[fp1], s.byFP[fp3] = rollV1, rollV3

	peers := []membership.Peer{{ID: "b", Fingerprint: fp1}, {ID: "c", Fingerprint: fp1}}
	if err := s.admit(membership.Candidate{ID: "d", Fingerprint: fp2}, peers); err != nil {
		t.Fatalf("v2 beside v1: %v", err)
	}
	err := s.admit(membership.Candidate{ID: "d", Fingerprint: fp3}, peers)
	if err == nil || !strings.Contains(err.Error(), ir.CodeCompatTypeRemoved) {
		t.Fatalf("v3 beside v1: %v", err)
	}
	if err2 := s.admit(membership.Candidate{ID: "d", Fingerprint: fp3}, peers); err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("cached verdict differs: %v", err2)
	}
	// a peer gossip does not know now is taken at the fingerprint it last
	// announced
	if err := s.admit(membership.Candidate{ID: "d", Fingerprint: fp3}, []membership.Peer{{ID: "b"}}); err == nil {
		t.Fatal("v3 beside a member last seen on v1 was admitted")
	}

	view := membership.View{Self: "a", Members: []membership.MemberView{
		{ID: "a", Raft: membership.RaftVoter, Tags: map[string]string{membership.TagFingerprint: fp2}},
		{ID: "b", Raft: membership.RaftVoter, Tags: map[string]string{membership.TagFingerprint: fp1}},
		{ID: "x", Raft: membership.RaftNone, Tags: map[string]string{membership.TagFingerprint: fp3}}, // not a member: ignored
	}}
	s.setView(func() membership.View { return view })
	if why := s.gate("a.y"); !strings.Contains(why, "not active in the cluster yet") || !strings.Contains(why, "b runs") {
		t.Fatalf("a.y while b runs v1: %q", why)
	}
	if why := s.gate("a.x"); why != "" {
		t.Fatalf("a.x: %q", why)
	}
	if why := s.gate("no.such"); why != "" {
		t.Fatalf("an undeclared type is the pipeline's to refuse: %q", why)
	}
	view.Members[1].Tags = map[string]string{membership.TagFingerprint: fp2}
	deadline := time.Now().Add(5 * time.Second)
	for s.gate("a.y") != "" {
		if time.Now().After(deadline) {
			t.Fatalf("a.y still refused after every member runs v2: %q", s.gate("a.y"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	var nilSchemas *schemas
	if nilSchemas.gate("a.y") != "" {
		t.Fatal("a nil gate refuses")
	}
}
