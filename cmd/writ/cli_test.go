package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestCobraHelpCompletionAndUsageErrors: help lists every command, the
// completion scripts exist, and every flag or argument error is one line
// naming the failing command's --help (exit 2).
func TestCobraHelpCompletionAndUsageErrors(t *testing.T) {
	var so, se bytes.Buffer
	if rc := run([]string{"--help"}, &so, &se); rc != 0 {
		t.Fatalf("--help: rc %d", rc)
	}
	for _, c := range []string{"init", "gen", "vet", "schema", "conformance", "table", "certs", "version", "completion"} {
		if !strings.Contains(so.String(), "\n  "+c+" ") {
			t.Errorf("--help lacks %q:\n%s", c, so.String())
		}
	}
	so.Reset()
	if rc := run([]string{"schema", "--help"}, &so, &se); rc != 0 || !strings.Contains(so.String(), "diff") || !strings.Contains(so.String(), "graph") {
		t.Errorf("schema --help: rc %d\n%s", rc, so.String())
	}
	for _, sh := range []string{"bash", "zsh", "fish", "powershell"} {
		so.Reset()
		if rc := run([]string{"completion", sh}, &so, &se); rc != 0 || !strings.Contains(so.String(), "writ") {
			t.Errorf("completion %s: rc %d", sh, rc)
		}
	}
	so.Reset()
	if rc := run(nil, &so, &se); rc != 2 || !strings.Contains(se.String(), "Available Commands") {
		t.Errorf("no command: rc %d, stderr %q", rc, se.String())
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"vet", "--bogus"}, "writ: unknown flag: --bogus: see `writ vet --help`"},
		{[]string{"gen", "extra"}, "writ: unexpected argument \"extra\" (fix: use --schema DIR): see `writ gen --help`"},
		{[]string{"table", "--schema"}, "see `writ table --help`"},
		{[]string{"schema", "diff", "one"}, "see `writ schema diff --help`"},
		{[]string{"schema"}, "writ: want a subcommand: see `writ schema --help`"},
		{[]string{"init"}, "see `writ init --help`"},
		{[]string{"nope"}, "unknown command \"nope\" for \"writ\": see `writ --help`"},
		{[]string{"certs"}, "writ: want a subcommand: see `writ certs --help`"},
		{[]string{"certs", "bogus"}, "unknown command \"bogus\" for \"writ certs\": see `writ certs --help`"},
		{[]string{"certs", "init", "--bogus"}, "writ: unknown flag: --bogus: see `writ certs init --help`"},
		{[]string{"certs", "init", "extra"}, "unexpected argument \"extra\" (fix: writ certs init [--dir DIR] [--name CLUSTER]): see `writ certs init --help`"},
		{[]string{"certs", "client", "a", "b"}, "want exactly one NAME (fix: writ certs client NAME [--ca DIR] [--out DIR]): see `writ certs client --help`"},
	} {
		so.Reset()
		se.Reset()
		rc := run(tc.args, &so, &se)
		if rc != 2 || !strings.Contains(se.String(), tc.want) || strings.Count(se.String(), "\n") != 1 {
			t.Errorf("%v: rc %d, stderr %q; want exit 2 and one line with %q", tc.args, rc, se.String(), tc.want)
		}
	}
}

func TestVersionFlagAndCommand(t *testing.T) {
	var a, b, se bytes.Buffer
	if rc := run([]string{"--version"}, &a, &se); rc != 0 {
		t.Fatal(se.String())
	}
	if rc := run([]string{"version"}, &b, &se); rc != 0 {
		t.Fatal(se.String())
	}
	if a.String() != b.String() || !strings.HasPrefix(a.String(), "writ ") || !strings.Contains(a.String(), "schema  sha256:") {
		t.Fatalf("--version %q, version %q", a.String(), b.String())
	}
}
