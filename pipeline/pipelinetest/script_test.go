package pipelinetest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/writ-dev/writ/pipeline"
)

// TestScripts_FakeLog runs every scenario script in testdata over the real
// pipeline with FakeLog, FakeClock, FakeEvaluator and FakeCatalog. The
// scripts are datadriven files (command key=value ..., optional input, ----,
// expected output); go test -run TestScripts -rewrite regenerates the
// expected output.
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
			if pipeline.StrictBuild && requiresNonStrict(t, path) {
				t.Skip("script exercises the production (non-strict) build")
			}
			h, err := NewHarness(t.TempDir(), FakeCatalog())
			if err != nil {
				t.Fatal(err)
			}
			defer h.P.Stop()
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				got, err := h.Run(d.Cmd, scriptArgs(d), d.Input)
				if err != nil {
					d.Fatalf(t, "%s: %v", d.Cmd, err)
				}
				return got
			})
			if len(h.Violations) > 0 {
				t.Errorf("instrumentation: %v", h.Violations)
			}
		})
	}
}

// requiresNonStrict reports whether the script's opening comment says
// "requires: !strict".
func requiresNonStrict(t *testing.T, path string) bool {
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(src, []byte("\n")) {
		if !bytes.HasPrefix(line, []byte("#")) {
			return false
		}
		if bytes.Contains(line, []byte("requires: !strict")) {
			return true
		}
	}
	return false
}

// scriptArgs is the directive's arguments as Harness.Run takes them: a
// bare key is "true", a list of values is joined with commas.
func scriptArgs(d *datadriven.TestData) map[string]string {
	args := make(map[string]string, len(d.CmdArgs))
	for _, a := range d.CmdArgs {
		v := "true"
		if len(a.Vals) > 0 {
			v = strings.Trim(strings.Join(a.Vals, ","), `"`)
		}
		args[a.Key] = v
	}
	return args
}
