package pipelinetest

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writ-dev/writ/pipeline"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of scenario scripts")

// TestScripts_FakeLog runs every scenario script in testdata over the real
// pipeline with FakeLog, FakeClock, FakeEvaluator and FakeCatalog.
func TestScripts_FakeLog(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 9 {
		t.Fatalf("expected at least one script per invariant W1–W9, found %d", len(files))
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			cases, err := ParseScript(path)
			if err != nil {
				t.Fatal(err)
			}
			if pipeline.StrictBuild && len(cases) > 0 && strings.Contains(strings.Join(cases[0].Comments, "\n"), "requires: !strict") {
				t.Skip("script exercises the production (non-strict) build")
			}
			h, err := NewHarness(t.TempDir(), FakeCatalog())
			if err != nil {
				t.Fatal(err)
			}
			defer h.P.Stop()
			outs := make([]string, len(cases))
			for i, c := range cases {
				got, err := h.Run(c.Cmd, c.Args, c.Input)
				if err != nil {
					t.Fatalf("%s:%d: %s: %v", path, c.Line, c.Cmd, err)
				}
				outs[i] = got
				if !*rewrite && got != c.Expected {
					t.Errorf("%s:%d: %s %s\n--- got\n%s\n--- want\n%s", path, c.Line, c.Cmd, c.ArgsRaw, got, c.Expected)
				}
			}
			if len(h.Violations) > 0 {
				t.Errorf("instrumentation: %v", h.Violations)
			}
			if *rewrite {
				if err := os.WriteFile(path, []byte(FormatScript(cases, outs)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
