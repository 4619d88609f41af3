package conformance

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/internal/depcheck"
	"github.com/writ-dev/writ/schema/ir"
)

func TestImportRules(t *testing.T) {
	depcheck.Forbid(t, "github.com/writ-dev/writ/conformance",
		"github.com/writ-dev/writ/raftstore",
		"github.com/writ-dev/writ/membership",
		"github.com/writ-dev/writ/cmd",
		"go.etcd.io/raft",
		"github.com/hashicorp/serf",
	)
}

// copySchema copies the jobs schema into a temp dir and applies edit to the
// named file.
func copySchema(t *testing.T, file string, edit func(string) string) string {
	t.Helper()
	dir := t.TempDir()
	ents, err := os.ReadDir(jobsSchema)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".cue") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(jobsSchema, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if e.Name() == file {
			s2 := edit(s)
			if s2 == s {
				t.Fatalf("edit of %s changed nothing", file)
			}
			s = s2
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestUnclassifiedTypeIsBlocked(t *testing.T) {
	dir := copySchema(t, "entries.cue", func(s string) string {
		return strings.Replace(s, "entries: {\n", "entries: {\n\t\"job.audit\": {\n\t\tnumber: 99\n\t\tkeys: []\n\t\tpayload: {note: string & strings.MaxRunes(10)}\n\t}\n", 1)
	})
	var stdout, stderr bytes.Buffer
	code := Main([]string{"--schema", dir, "--only", "static", "--json"}, &stdout, &stderr, []ir.Catalog{jobsgen.Catalog()})
	if code != ExitFail {
		t.Fatalf("exit %d, want %d\n%s\n%s", code, ExitFail, stdout.String(), stderr.String())
	}
	var rep Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	c, _ := rep.Check("static.classified")
	if c.Result != Fail {
		t.Fatalf("static.classified: %s, want FAIL", c.Result)
	}
	found := false
	for _, f := range c.Findings {
		if f.Code == ir.CodeUnclassifiedType && f.Status == ir.StatusBlocked && strings.Contains(f.Message, "job.audit") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no BLOCKED WRIT_UNCLASSIFIED_TYPE naming job.audit: %+v", c.Findings)
	}
	// The schema never loaded, so nothing downstream may claim a pass.
	for _, id := range []string{"static.guard-states", "static.table-complete", "static.gen-fresh", "static.terminal-exits"} {
		if c, _ := rep.Check(id); c.Result != NotRun {
			t.Errorf("%s: %s, want NOT_RUN when the schema did not load", id, c.Result)
		}
	}
}

func TestTerminalExitAndUnknownStateFail(t *testing.T) {
	dir := copySchema(t, "machines.cue", func(s string) string {
		return strings.Replace(s, `RUNNING: ["COMPLETED", "FAILED", "PENDING", "CANCELLED"]`,
			`RUNNING: ["COMPLETED", "FAILED", "PENDING", "CANCELLED"]
			COMPLETED: ["RUNNING", "LIMBO"]`, 1)
	})
	rep := mustRun(t, Options{SchemaDir: dir, Only: []Tier{TierStatic}})
	for id, code := range map[string]string{"static.terminal-exits": ir.CodeTerminalHasExit, "static.guard-states": ir.CodeGuardUnknownState} {
		c, _ := rep.Check(id)
		if c.Result != Fail || !hasCode(c.Findings, code) {
			t.Errorf("%s: %s %v, want FAIL with %s", id, c.Result, c.Findings, code)
		}
	}
	if rep.Summary.ExitCode != ExitFail {
		t.Errorf("exit %d, want 1", rep.Summary.ExitCode)
	}
}

func hasCode(fs []Finding, code string) bool {
	for _, f := range fs {
		if f.Code == code && f.Fails() {
			return true
		}
	}
	return false
}

func TestNoCatalogIsNotRunNeverPass(t *testing.T) {
	rep := mustRun(t, Options{SchemaDir: jobsSchema, Only: []Tier{TierStatic}})
	for _, id := range []string{"static.plugin-types"} {
		if c, _ := rep.Check(id); c.Result != NotRun || c.Reason == "" {
			t.Errorf("%s: %s (%q), want NOT_RUN with a reason", id, c.Result, c.Reason)
		}
	}
	// Without a linked generated catalog the runtime catalog is checked.
	if c, _ := rep.Check("static.table-complete"); c.Result != Pass {
		t.Errorf("static.table-complete: %s (%q), want PASS over the runtime catalog", c.Result, c.Reason)
	}
	if rep.Summary.ExitCode != ExitFail {
		t.Errorf("exit %d: a selected check that did not run must not exit 0", rep.Summary.ExitCode)
	}
}

func TestPluginFingerprintMismatch(t *testing.T) {
	// A schema that differs from the one the plugin was built against.
	dir := copySchema(t, "entries.cue", func(s string) string {
		return strings.Replace(s, "priority: int & >=0 & <=1000", "priority: int & >=0 & <=999", 1)
	})
	rep := mustRun(t, Options{SchemaDir: dir, PluginPath: jobsPlugin(t), Only: []Tier{TierStatic}, checks: []string{"static.plugin-types"}})
	c, _ := rep.Check("static.plugin-types")
	if c.Result != Fail || !hasCode(c.Findings, CodePluginFingerprint) {
		t.Fatalf("static.plugin-types: %s %v, want FAIL with %s", c.Result, c.Findings, CodePluginFingerprint)
	}
}

func TestListPrintsEveryInvariant(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main([]string{"--list"}, &out, &errb, nil); code != ExitPass {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, inv := range Invariants {
		if !strings.Contains(out.String(), "  "+inv.ID+" ") {
			t.Errorf("--list does not show %s", inv.ID)
		}
	}
	if code := Main([]string{"--only", "bogus", "--schema", "x"}, &out, &errb, nil); code != ExitUsage {
		t.Errorf("bad --only: exit %d, want %d", code, ExitUsage)
	}
}

func TestStrictUnclassified(t *testing.T) {
	rep := mustRun(t, Options{SchemaDir: jobsSchema, Catalogs: []ir.Catalog{jobsgen.Catalog()}, Only: []Tier{TierProperty}, Cases: 50, checks: []string{"property.strict-unclassified"}})
	c, _ := rep.Check("property.strict-unclassified")
	if c.Result != Pass || c.Cases == 0 {
		t.Fatalf("property.strict-unclassified: %s %s %v", c.Result, c.Reason, c.Findings)
	}
}

func TestValidateCUEAgreesOnJobs(t *testing.T) {
	rep := mustRun(t, Options{SchemaDir: jobsSchema, Catalogs: []ir.Catalog{jobsgen.Catalog()}, Only: []Tier{TierProperty}, Cases: 2000, checks: []string{"property.validate-cue"}})
	c, _ := rep.Check("property.validate-cue")
	if c.Result != Pass || c.Cases < 2000 {
		t.Fatalf("property.validate-cue: %s %d cases %v", c.Result, c.Cases, c.Findings)
	}
	for _, f := range c.Findings {
		t.Errorf("unexpected finding: %s", f)
	}
}
