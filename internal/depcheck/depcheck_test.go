package depcheck

import "testing"

// TestForbidCatchesAViolation proves the check can fail: kv's closure
// contains "fmt", so forbidding it must report an error.
func TestForbidCatchesAViolation(t *testing.T) {
	ft := &fakeTB{TB: t}
	Forbid(ft, "github.com/writ-dev/writ/kv", "fmt")
	if !ft.failed {
		t.Fatal("Forbid did not report fmt in kv's closure")
	}
}

func TestKVIsStdlibOnly(t *testing.T) {
	Forbid(t, "github.com/writ-dev/writ/kv", "github.com/hashicorp", "github.com/spf13", "go.etcd.io", "google.golang.org", "cuelang.org")
}

type fakeTB struct {
	testing.TB
	failed bool
}

func (f *fakeTB) Errorf(string, ...any) { f.failed = true }
func (f *fakeTB) Helper()               {}

// TestPKIIsStdlibOnly: certificates are made and checked with the standard
// library's crypto only.
func TestPKIIsStdlibOnly(t *testing.T) {
	Forbid(t, "github.com/writ-dev/writ/pki", "github.com/", "go.etcd.io", "google.golang.org", "cuelang.org", "golang.org/x", "pgregory.net")
}

// TestOnlyCatchesAViolation proves the allow-list can fail: proccluster
// links api/writv1, so allowing only procenv must report it.
func TestOnlyCatchesAViolation(t *testing.T) {
	ft := &fakeTB{TB: t}
	Only(ft, "github.com/writ-dev/writ/internal/proccluster", "github.com/writ-dev/writ", "github.com/writ-dev/writ/internal/procenv")
	if !ft.failed {
		t.Fatal("Only did not report api/writv1 in proccluster's closure")
	}
}

// TestStdlibAndCatchesAViolation proves the standard-library rule can
// fail: the runtime catalog links schema/ir, so allowing nothing but the
// standard library must report it.
func TestStdlibAndCatchesAViolation(t *testing.T) {
	ft := &fakeTB{TB: t}
	StdlibAnd(ft, "github.com/writ-dev/writ/schema/runtimecat")
	if !ft.failed {
		t.Fatal("StdlibAnd did not report schema/ir in runtimecat's closure")
	}
}
