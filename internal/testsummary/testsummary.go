// Package testsummary owns where the robustness suite's tiers leave their
// summary lines: a file named by WRITTEST_ROBUSTNESS_SUMMARY, appended as
// "<test>: <line>", so that a run without -v (make soak) keeps its figures.
// Tests only.
package testsummary

import (
	"fmt"
	"os"
	"testing"
)

// Env names the file Record appends to; unset, Record does nothing.
const Env = "WRITTEST_ROBUSTNESS_SUMMARY"

// Record appends "<name>: <line>" to the file Env names, failing t (not
// stopping it) when the file cannot be written.
func Record(t testing.TB, name, line string) {
	t.Helper()
	path := os.Getenv(Env)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Errorf("%s: %v", Env, err)
		return
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "%s: %s\n", name, line); err != nil {
		t.Errorf("%s: %v", Env, err)
	}
}
