package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTableOfAnySchema(t *testing.T) {
	var so, se bytes.Buffer
	dir := filepath.Join("..", "..", "schema", "runtimecat", "testdata", "rollout")
	if rc := run([]string{"table", "--schema", dir}, &so, &se); rc != 0 {
		t.Fatalf("rc %d: %s", rc, se.String())
	}
	for _, want := range []string{"rollout.plan", "rollout.batch", "receipt", "items: rollout.step", "rollout.settings", "config",
		"pause→PAUSED", "field state", "machine rollout (key rollout_id)", "ROLLED_BACK → PLANNED"} {
		if !strings.Contains(so.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, so.String())
		}
	}
}

// TestTableRuntimeMatchesGenerated: the jobs table through the runtime
// catalog is the generated catalog's, line for line after the header.
func TestTableRuntimeMatchesGenerated(t *testing.T) {
	var gen, rt, se bytes.Buffer
	if rc := run([]string{"table"}, &gen, &se); rc != 0 {
		t.Fatal(se.String())
	}
	if rc := run([]string{"table", "--schema", filepath.Join("..", "..", "examples", "jobs", "schema")}, &rt, &se); rc != 0 {
		t.Fatal(se.String())
	}
	_, g, _ := strings.Cut(gen.String(), "\n")
	_, r, _ := strings.Cut(rt.String(), "\n")
	if g != r || !strings.Contains(g, "job.submit") {
		t.Fatalf("tables differ:\ngenerated:\n%s\nruntime:\n%s", g, r)
	}
}

func TestTableRefusesBadSchemas(t *testing.T) {
	blocked := t.TempDir()
	src := "package bad\n\nentries: \"a.b\": {\n\ttype_number: 1\n\tclass: \"request\"\n\tkeys: [\"a/{n}\"]\n\tpayload: n: int\n}\nmachines: {}\n"
	if err := os.WriteFile(filepath.Join(blocked, "bad.cue"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		args []string
		want string
	}{
		"missing dir": {[]string{"table", "--schema", filepath.Join(blocked, "nope")}, "nope"},
		"blocked":     {[]string{"table", "--schema", blocked}, "WRIT_UNSUPPORTED_CONSTRAINT"},
		"argument":    {[]string{"table", "extra"}, "--schema DIR"},
	} {
		var so, se bytes.Buffer
		rc := run(c.args, &so, &se)
		if rc == 0 || !strings.Contains(se.String(), c.want) || so.Len() != 0 {
			t.Errorf("%s: rc %d, stdout %q, stderr %q (want an error naming %q)", name, rc, so.String(), se.String(), c.want)
		}
	}
}
