package compat_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/writ-dev/writ/schema/compat"
	"github.com/writ-dev/writ/schema/ir"
	"github.com/writ-dev/writ/schema/load"
)

// The rolling-upgrade test schemas writd's tests run: v2 adds lease.renew
// and widens ttl_ms, v3 removes lease.release.
const rolling = "../../cmd/writd/testdata/rolling/"

func loadSchema(t *testing.T, v string) *ir.Schema {
	t.Helper()
	res, err := load.Dir(rolling + v)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed() {
		t.Fatalf("%s does not load: %v", v, res.Findings)
	}
	return res.Schema
}

func names(s *ir.Schema) []string {
	var out []string
	for _, e := range s.Entries {
		out = append(out, e.Name)
	}
	slices.Sort(out)
	return out
}

// TestCheck: the direction that matters is active → candidate. Adding a
// type and widening a bound is admitted; removing a type is refused naming
// the code and the fix, and so is going back from v2 to v1 (entries of the
// type v2 added may be in the log).
func TestCheck(t *testing.T) {
	v1, v2, v3 := loadSchema(t, "v1"), loadSchema(t, "v2"), loadSchema(t, "v3")
	if err := compat.Check(v1, v1); err != nil {
		t.Fatalf("v1 → v1: %v", err)
	}
	if err := compat.Check(v1, v2); err != nil {
		t.Fatalf("v1 → v2 (added type, widened bound): %v", err)
	}
	for _, tc := range []struct {
		name     string
		old, new *ir.Schema
		typ      string
	}{{"v1 → v3", v1, v3, "lease.release"}, {"v2 → v1", v2, v1, "lease.renew"}} {
		err := compat.Check(tc.old, tc.new)
		var ce *compat.Error
		if !errors.As(err, &ce) {
			t.Fatalf("%s: %v, want a *compat.Error", tc.name, err)
		}
		if ce.Code() != ir.CodeCompatTypeRemoved || !strings.Contains(err.Error(), tc.typ) || !strings.Contains(err.Error(), "(fix: keep the type") {
			t.Fatalf("%s: %q does not name %s, the type and the fix", tc.name, err, ir.CodeCompatTypeRemoved)
		}
	}
}

// TestEffective: a cluster of v1 and v2 nodes may use only v1's types;
// every v1 node is admitted beside it, a v3 node is not.
func TestEffective(t *testing.T) {
	v1, v2, v3 := loadSchema(t, "v1"), loadSchema(t, "v2"), loadSchema(t, "v3")
	eff := compat.Effective(v2, v1)
	if got, want := names(eff), names(v1); !slices.Equal(got, want) {
		t.Fatalf("Effective(v2, v1) types %v, want v1's %v", got, want)
	}
	if compat.Declares(eff, "lease.renew") || !compat.Declares(eff, "lease.acquire") {
		t.Fatal("Effective(v2, v1) must declare lease.acquire and not lease.renew")
	}
	if got := compat.Missing(v2, eff); !slices.Equal(got, []string{"lease.renew"}) {
		t.Fatalf("Missing(v2, eff) = %v", got)
	}
	if err := compat.Check(eff, v1); err != nil {
		t.Fatalf("a v1 node beside v1 and v2: %v", err)
	}
	if err := compat.Check(eff, v3); err == nil {
		t.Fatal("a v3 node beside v1 and v2 was admitted")
	}
	if got := compat.Effective(v2, v2); !slices.Equal(names(got), names(v2)) {
		t.Fatalf("Effective(v2, v2) = %v", names(got))
	}
	if len(compat.Effective(v1, v1).Machines) != 1 || !compat.Effective(v1, v1).Machines[0].Allowed("HELD", "FREE") {
		t.Fatal("Effective(v1, v1) lost the lease machine's transitions")
	}
}

// TestEncodeDecode: the model travels with its fingerprint; a model that
// is not the announced schema is refused.
func TestEncodeDecode(t *testing.T) {
	v1, v2 := loadSchema(t, "v1"), loadSchema(t, "v2")
	b, err := compat.Encode(v2)
	if err != nil {
		t.Fatal(err)
	}
	got, err := compat.Decode(b, v2.Fingerprint())
	if err != nil {
		t.Fatal(err)
	}
	if got.Fingerprint() != v2.Fingerprint() {
		t.Fatal("decoded model has another fingerprint")
	}
	if _, err := compat.Decode(b, v1.Fingerprint()); err == nil || !strings.Contains(err.Error(), "not the announced") {
		t.Fatalf("v2's model announced as v1: %v", err)
	}
	if _, err := compat.Decode([]byte("{"), v1.Fingerprint()); err == nil {
		t.Fatal("a truncated model was accepted")
	}
}
