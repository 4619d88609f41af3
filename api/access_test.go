package api

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writ-dev/writ/api/writv1"
)

func hashOf(tok string) string { h := sha256.Sum256([]byte(tok)); return hex.EncodeToString(h[:]) }

// TestRoleTableCoversEveryMethod: every writ.v1 method has its role in
// the table (a new RPC is not silently operator-only or open).
func TestRoleTableCoversEveryMethod(t *testing.T) {
	var names []string
	for _, m := range writv1.Writ_ServiceDesc.Methods {
		names = append(names, m.MethodName)
	}
	for _, s := range writv1.Writ_ServiceDesc.Streams {
		names = append(names, s.StreamName)
	}
	for _, n := range names {
		if _, ok := methodRoles[n]; !ok {
			t.Errorf("writ.v1.%s has no role in methodRoles (api/auth.go)", n)
		}
	}
	for m, want := range map[string]string{
		"/writ.v1.Writ/Submit": RoleWrite, "/writ.v1.Writ/Keyring": RoleOperator, "/writ.v1.Writ/Get": RoleRead,
		"/writ.v1.Writ/Future": RoleOperator, "/grpc.health.v1.Health/Check": "", "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo": RoleRead,
	} {
		if got := RequiredRole(m); got != want {
			t.Errorf("RequiredRole(%s) = %q, want %q", m, got, want)
		}
	}
}

func TestHasRole(t *testing.T) {
	for _, c := range []struct {
		roles     []string
		role, typ string
		want      bool
	}{
		{[]string{"read"}, RoleRead, "", true},
		{[]string{"read"}, RoleWrite, "job.submit", false},
		{[]string{"write"}, RoleWrite, "job.submit", true},
		{[]string{"write:job."}, RoleWrite, "job.submit", true},
		{[]string{"write:job."}, RoleWrite, "queue.control", false},
		{[]string{"write:job."}, RoleOperator, "", false},
		{[]string{"operator"}, RoleRead, "", false},
		{nil, RoleRead, "", false},
	} {
		if got := hasRole(c.roles, c.role, c.typ); got != c.want {
			t.Errorf("hasRole(%v, %s, %q) = %v, want %v", c.roles, c.role, c.typ, got, c.want)
		}
	}
}

func TestParseAccess(t *testing.T) {
	a, err := ParseAccess([]byte("identities:\n  - {name: ci, token_sha256: " + hashOf("s3cret") + ", roles: [read, \"write:job.\"]}\n  - {name: alice, roles: [operator]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := a.tokenIdentity("s3cret"); !ok || n != "ci" {
		t.Errorf("token s3cret = %q %v, want ci", n, ok)
	}
	if _, ok := a.tokenIdentity("s3cre"); ok {
		t.Error("a prefix of the token was accepted")
	}
	if r := a.Roles("alice"); len(r) != 1 || r[0] != "operator" {
		t.Errorf("alice roles %v", r)
	}
	for _, c := range []struct{ doc, want string }{
		{"identities:\n  - {name: x, roles: [admin]}\n", `identities[0].roles: "admin" is not a role`},
		{"identities:\n  - {name: x, roles: []}\n", "identities[0].roles: x has no roles"},
		{"identities:\n  - {name: x, token_sha256: abc, roles: [read]}\n", "identities[0].token_sha256: not a hex SHA-256"},
		{"identities:\n  - {name: x, roles: [read]}\n  - {name: x, roles: [write]}\n", "identities[1].name: \"x\" is listed twice"},
		{"identities:\n  - {name: x, token: plain, roles: [read]}\n", "cannot parse YAML"},
		{"identities:\n  - {name: a, token_sha256: " + hashOf("t") + ", roles: [read]}\n  - {name: b, token_sha256: " + hashOf("t") + ", roles: [read]}\n", "the same token as a"},
	} {
		_, err := ParseAccess([]byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %v, want one line with %q", c.doc, err, c.want)
		}
	}
	if a, err := ParseAccess(nil); err != nil || len(a.tokens) != 0 {
		t.Errorf("empty file: %v", err)
	}
}

func TestLoadAccessRefusesWideMode(t *testing.T) {
	f := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(f, []byte("identities: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadAccess(f); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("0644 tokens file: %v, want refused with chmod 600", err)
	}
	if err := os.Chmod(f, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadAccess(f); err != nil {
		t.Fatal(err)
	}
}
