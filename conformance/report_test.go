package conformance

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/writ-dev/writ/schema/ir"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestEveryInvariantHasACheck(t *testing.T) {
	m := InvariantMap()
	for _, inv := range Invariants {
		if len(m[inv.ID]) == 0 {
			t.Errorf("invariant %s (%s) has no check proving it", inv.ID, inv.Title)
		}
	}
	known := map[string]bool{}
	for _, inv := range Invariants {
		known[inv.ID] = true
	}
	for _, c := range Checks() {
		if len(c.Invariants) == 0 {
			t.Errorf("check %s proves no invariant", c.ID)
		}
		for _, w := range c.Invariants {
			if !known[w] {
				t.Errorf("check %s names unknown invariant %s", c.ID, w)
			}
		}
	}
}

func goldenReport() *Report {
	r := &Report{
		Schema: "examples/jobs", Fingerprint: "sha256:0123", Plugin: "bin/writ-jobs",
		Tiers: []Tier{TierStatic, TierProperty}, Cases: 10000, Seed: 1,
		Checks: []CheckResult{
			{ID: "static.classified", Tier: TierStatic, Invariants: []string{"W6"}, Title: "every declared entry type has a class", Selected: true, Cases: 13},
			{ID: "static.reachable", Tier: TierStatic, Invariants: []string{"W8"}, Title: "every state is reachable", Selected: true, Cases: 3,
				Findings: []Finding{{Code: ir.CodeUnreachableState, Status: ir.StatusReviewRequired, Subject: "machines.job", Message: "state X is unreachable", Fix: "add a transition"}}},
			{ID: "static.table-complete", Tier: TierStatic, Invariants: []string{"W6"}, Title: "table covers every type", Selected: true,
				Findings: []Finding{
					{Code: CodeTableMissingType, Status: ir.StatusBlocked, Subject: "entries.job.submit", Message: "missing", Fix: "run writ gen"},
					{Code: CodeTableExtraType, Status: ir.StatusBlocked, Subject: "entries.x.y", Pos: "a.cue:1:2", Message: "extra"},
				}},
			{ID: "property.eval-pure", Tier: TierProperty, Invariants: []string{"W7"}, Title: "evaluation is pure", Selected: true, Result: NotRun, Reason: "no plugin given (--plugin PATH)"},
			{ID: "cluster.leader-kill", Tier: TierCluster, Invariants: []string{"W10", "W9"}, Title: "leader kill", Result: NotRun, Reason: "tier cluster not selected"},
		},
	}
	r.finalize()
	return r
}

func TestReportGolden(t *testing.T) {
	r := goldenReport()
	if r.Summary.ExitCode != ExitFail {
		t.Fatalf("exit code %d, want %d (a BLOCKED finding and a selected NOT RUN check)", r.Summary.ExitCode, ExitFail)
	}
	if c, _ := r.Check("static.reachable"); c.Result != Pass {
		t.Errorf("a REVIEW_REQUIRED finding alone must not fail its check: got %s", c.Result)
	}
	if c, _ := r.Check("property.eval-pure"); c.Result != NotRun {
		t.Errorf("not run reported as %s", c.Result)
	}
	for _, tc := range []struct {
		file  string
		write func(*bytes.Buffer) error
	}{
		{"report.golden.txt", func(b *bytes.Buffer) error { return r.WriteText(b) }},
		{"report.golden.json", func(b *bytes.Buffer) error { return r.WriteJSON(b) }},
	} {
		var b bytes.Buffer
		if err := tc.write(&b); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", tc.file)
		if *update {
			if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -run TestReportGolden -update)", err)
		}
		if !bytes.Equal(b.Bytes(), want) {
			t.Errorf("%s differs from the golden file:\n--- got\n%s\n--- want\n%s", tc.file, b.String(), want)
		}
		// Deterministic: rendering again gives the same bytes.
		var again bytes.Buffer
		if err := tc.write(&again); err != nil || !bytes.Equal(again.Bytes(), b.Bytes()) {
			t.Errorf("%s: second rendering differs", tc.file)
		}
	}
}

func TestPassOnlyWhenEverySelectedCheckPassed(t *testing.T) {
	r := &Report{Checks: []CheckResult{
		{ID: "a", Selected: true},
		{ID: "b", Selected: false, Result: NotRun, Reason: "tier cluster not selected"},
	}}
	r.finalize()
	if r.Summary.ExitCode != ExitPass || r.Summary.Passed != 1 || r.Summary.NotRun != 1 {
		t.Fatalf("summary %+v, want exit 0 with 1 passed and 1 unselected not run", r.Summary)
	}
	r.Checks = append(r.Checks, CheckResult{ID: "c", Selected: true, Result: NotRun, Reason: "no plugin"})
	r.finalize()
	if r.Summary.ExitCode != ExitFail {
		t.Fatalf("a selected check that did not run must fail the run; summary %+v", r.Summary)
	}
}
