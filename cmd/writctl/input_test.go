package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// oneLine asserts a single writctl: line on stderr with every want.
func oneLine(t *testing.T, what string, code, wantCode int, stderr string, want ...string) {
	t.Helper()
	msg := strings.TrimSpace(stderr)
	if code != wantCode || strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "writctl: ") {
		t.Errorf("%s: exit %d %q, want exit %d and one writctl: line", what, code, msg, wantCode)
		return
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("%s: %q lacks %q", what, msg, w)
		}
	}
}

// TestWrongClassAndOversizeOnRealNode: against a real writd, an entry sent
// with another class's command is told which command to use before its
// payload is validated, and a payload over the API's message limit is one
// line with the limit and the fix and the REJECTED exit code, whether
// writctl sees it first or the server refuses the message.
func TestWrongClassAndOversizeOnRealNode(t *testing.T) {
	addr := startNode(t, "127.0.21.20")
	full := `{"job_id":"k1","queue":"q","priority":1,"command":"true"}`
	code, _, stderr := run(t, "", "--addr", addr, "report", "job.submit", full)
	oneLine(t, "report a request", code, exitRejected, stderr, "job.submit is a request type, not a fact", "writctl submit job.submit")
	code, _, stderr = run(t, "", "--addr", addr, "report", "job.submit", `{"id":"x"}`)
	oneLine(t, "report a request with a bad payload", code, exitRejected, stderr, "is a request type")
	code, _, stderr = run(t, "", "--addr", addr, "deliver", "job.submit", full)
	oneLine(t, "deliver a request", code, exitRejected, stderr, "not a receipt", "writctl submit job.submit")
	code, _, stderr = run(t, "", "--addr", addr, "submit", "job.state_report", `{}`)
	oneLine(t, "submit a fact", code, exitRejected, stderr, "job.state_report is a fact type, not a request", "writctl report job.state_report")
	// The right class goes on to the handler (here: the queue is missing).
	if _, _, stderr := run(t, "", "--addr", addr, "submit", "--id", "k-ok", "job.submit", full); strings.Contains(stderr, "type, not a") || !strings.Contains(stderr, "queue") {
		t.Fatalf("a request of the right class was not passed on: %s", stderr)
	}

	dir := t.TempDir()
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, []byte(`{"job_id":"`+strings.Repeat("a", apiMaxMessage)+`","queue":"q"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"submit", "report", "deliver"} {
		code, _, stderr := run(t, "", "--addr", addr, cmd, "job.submit", "@"+big)
		oneLine(t, cmd+" over the limit", code, exitRejected, stderr, "4194304-byte message limit", "nothing was sent", "split it")
	}
	// Just under writctl's check, with an ID that pushes the message over
	// the server's limit: the server's refusal reads the same way.
	edge := filepath.Join(dir, "edge.json")
	pad := apiMaxMessage - envelopeRoom - len(`{"job_id":"","queue":"q"}`)
	if err := os.WriteFile(edge, []byte(`{"job_id":"`+strings.Repeat("b", pad)+`","queue":"q"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = run(t, "", "--addr", addr, "submit", "--id", strings.Repeat("i", 2*envelopeRoom), "job.submit", "@"+edge)
	oneLine(t, "server-side message limit", code, exitRejected, stderr, "4194304-byte message limit", "nothing was appended", "larger than max")
}

// TestUsageErrorsNameSubcommandHelp: flag and argument errors name the
// failing command's --help, exit 2, one line.
func TestUsageErrorsNameSubcommandHelp(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"submit", "job.submit"}, "see `writctl submit --help`"},
		{[]string{"submit", "--id"}, "flag needs an argument: --id: see `writctl submit --help`"},
		{[]string{"--timeout", "soon", "status"}, "see `writctl status --help`"},
		{[]string{"config", "upgrade", "--bogus"}, "see `writctl config upgrade --help`"},
		{[]string{"report"}, "see `writctl report --help`"},
	} {
		code, _, stderr := run(t, "", c.args...)
		oneLine(t, strings.Join(c.args, " "), code, exitUsage, stderr, c.want)
	}
}
