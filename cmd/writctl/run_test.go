package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writ-dev/writ/internal/depcheck"
)

func run(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestUsageErrors(t *testing.T) {
	badKey, shortKey := filepath.Join(t.TempDir(), "bad.key"), filepath.Join(t.TempDir(), "short.key")
	if os.WriteFile(badKey, []byte("not*base64\n"), 0o600) != nil || os.WriteFile(shortKey, []byte("c2hvcnQ="), 0o600) != nil {
		t.Fatal("cannot write key files")
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("version: \"2\"\nsettings:\n  commit_timeout: soon\n  max_batch: 1\n  log_level: info\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"frobnicate"}, exitUsage, "unknown command"},
		{[]string{"status", "--bogus"}, exitUsage, "unknown flag"},
		{[]string{"submit", "job.submit"}, exitUsage, "accepts 2 arg"},
		{[]string{"submit", "job.submit", "{not json"}, exitUsage, "not valid JSON"},
		{[]string{"-o", "xml", "status"}, exitUsage, "-o text, -o json, -o yaml, -o table"},
		{[]string{"config", "upgrade"}, exitUsage, "needs --file"},
		{[]string{"config", "upgrade", "--file", bad}, exitUsage, "settings.commit_timeout"},
		{[]string{"bench", "--type", "job.control"}, exitUsage, "--type"},
		{[]string{"keyring", "install"}, exitUsage, "keyring install needs --key-file FILE"},
		{[]string{"keyring", "install", "c2hvcnQ="}, exitUsage, "not as an argument: arguments are visible to every user in ps"},
		{[]string{"keyring", "list", "extra"}, exitUsage, "takes no arguments"},
		{[]string{"keyring", "use", "--key-file", badKey}, exitUsage, "keyring use --key-file " + badKey + ": key is not valid base64"},
		{[]string{"keyring", "remove", "--key-file", shortKey}, exitUsage, "keyring remove --key-file " + shortKey + ": key decodes to 5 bytes"},
		{[]string{"keyring", "remove", "--key-file", filepath.Join(t.TempDir(), "none")}, exitUsage, "no such file"},
		{[]string{"--addr", "127.0.3.40:1", "--timeout", "2s", "status"}, exitUnavailable, "cannot reach writd at 127.0.3.40:1"},
	} {
		code, _, errs := run(t, "", c.args...)
		if code != c.code || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%v: code %d stderr %q, want code %d and one line containing %q", c.args, code, errs, c.code, c.want)
		}
	}
}

func TestHelpAndCompletion(t *testing.T) {
	code, out, _ := run(t, "", "--help")
	for _, cmd := range []string{"status", "members", "submit", "report", "deliver", "watch", "get", "list", "outcome", "facts", "conflicts", "plugins", "config", "bench", "keyring", "completion"} {
		if !strings.Contains(out, "  "+cmd) {
			t.Errorf("help does not list %s", cmd)
		}
	}
	if code != 0 {
		t.Fatalf("help exit %d", code)
	}
	if code, out, _ := run(t, "", "completion", "bash"); code != 0 || !strings.Contains(out, "writctl") {
		t.Fatalf("completion: %d", code)
	}
}

func TestImportRules(t *testing.T) {
	depcheck.Forbid(t, "github.com/writ-dev/writ/cmd/writctl",
		"github.com/writ-dev/writ/raftstore", "github.com/writ-dev/writ/membership",
		"github.com/writ-dev/writ/pipeline", "github.com/writ-dev/writ/plugins/host", "go.etcd.io", "github.com/hashicorp/serf")
}
