package conformance

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/writ-dev/writ/examples/leases/leasesgen"
	"github.com/writ-dev/writ/schema/ir"
)

// The second example domain, a lease/lock service whose machines cycle
// (FREE → HELD → EXPIRED → HELD …, ACTIVE ⇄ LOST), runs through the same
// static and property tiers as jobs: the suite must not assume the jobs
// schema anywhere. The cluster tier needs a writd that runs a schema other
// than the embedded jobs one, so it is not selected here.

const leasesSchema = "../examples/leases/schema"

// leasesPlugin builds the real leases plugin binary into the test's
// temporary directory (the Go build cache makes the second build cheap).
func leasesPlugin(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "writ-leases")
	out, err := exec.Command("go", "build", "-o", path, "github.com/writ-dev/writ/examples/leases/cmd/writ-leases").CombinedOutput()
	if err != nil {
		t.Fatalf("building the leases plugin: %v\n%s", err, out)
	}
	return path
}

func leasesOptions(t *testing.T, cases int, tiers ...Tier) Options {
	return Options{
		SchemaDir:  leasesSchema,
		PluginPath: leasesPlugin(t),
		Catalogs:   []ir.Catalog{leasesgen.Catalog()},
		Only:       tiers,
		Cases:      cases,
	}
}

// requireAllPass fails t for every check of the selected tiers that did
// not pass (NOT RUN included: every static and property check applies to
// the leases schema) or exercised fewer cases than min asks.
func requireAllPass(t *testing.T, rep *Report, tiers []Tier, min map[string]int) {
	t.Helper()
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", text.String())
	want := map[Tier]bool{}
	for _, tr := range tiers {
		want[tr] = true
	}
	ran := 0
	for _, c := range rep.Checks {
		if !want[c.Tier] {
			if c.Result != NotRun || c.Selected {
				t.Errorf("%s: unselected tier reported %s", c.ID, c.Result)
			}
			continue
		}
		ran++
		if c.Result != Pass {
			t.Errorf("%s: %s %s %v", c.ID, c.Result, c.Reason, c.Findings)
		}
		if c.Cases < min[c.ID] {
			t.Errorf("%s exercised only %d cases, want at least %d", c.ID, c.Cases, min[c.ID])
		}
	}
	if ran == 0 {
		t.Fatal("no check of the selected tiers ran")
	}
	if rep.Summary.ExitCode != ExitPass {
		t.Errorf("exit code %d, want 0", rep.Summary.ExitCode)
	}
}

func TestLeasesStatic(t *testing.T) {
	rep := mustRun(t, leasesOptions(t, 2000, TierStatic))
	requireAllPass(t, rep, []Tier{TierStatic}, nil)
	if rep.Fingerprint != leasesgen.Fingerprint {
		t.Errorf("report fingerprint %s, generated %s", rep.Fingerprint, leasesgen.Fingerprint)
	}
}

// TestLeasesProperty runs every property check with 10,000 generated cases
// (CUE oracle, codec round trips, guard folds) and the pipeline workload
// through the real plugin process.
func TestLeasesProperty(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 cases per check through the real plugin: skipped with -short")
	}
	rep := mustRun(t, leasesOptions(t, DefaultCases, TierProperty))
	requireAllPass(t, rep, []Tier{TierProperty}, minCases)
}
