package main

import (
	"strings"
	"syscall"
	"testing"

	"github.com/writ-dev/writ/internal/proctest"
)

// TestPausedNodeBeforeTheRequestLeft pauses (SIGSTOP) the only node before
// writctl connects: the connection's HTTP/2 handshake never completes, so
// the request never leaves writctl and nothing can have been appended.
// That is exit 4 ("nothing was sent"), not UNCERTAIN. (A request that did
// leave, to a node that then never answers, is exit 5: see cmd/writd's
// TestWritctl_UncertainWhenTheLeaderNeverAnswers.)
func TestPausedNodeBeforeTheRequestLeft(t *testing.T) {
	addr, p := startNodeCmd(t, "127.0.44.10", "github.com/writ-dev/writ/examples/jobs/cmd/writ-jobs")
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Signal(syscall.SIGCONT) }) // before the node is stopped
	proctest.WaitStopped(t, p.Pid)
	code, out, errs := run(t, "", "--addr", addr, "--timeout", "1s", "submit", "job.submit", `{"job_id":"j1","queue":"q1","priority":1,"command":"run"}`)
	if code != exitUnavailable || !strings.Contains(errs, "never left writctl") || strings.Contains(errs, "UNCERTAIN") {
		t.Fatalf("submit to a paused node: exit %d (want %d, never left)\nstdout: %s\nstderr: %s", code, exitUnavailable, out, errs)
	}
}

// TestUnreachableIsUnavailableNotUncertain: when no endpoint accepts a
// connection the request never left writctl: exit 4, and writctl tries
// every endpoint of a comma-separated --addr.
func TestUnreachableIsUnavailableNotUncertain(t *testing.T) {
	code, _, errs := run(t, "", "--addr", "127.0.44.11:1,127.0.44.12:1", "--timeout", "2s", "submit", "job.submit", `{"job_id":"j1"}`)
	if code != exitUnavailable || !strings.Contains(errs, "never left writctl") || strings.Contains(errs, "UNCERTAIN") {
		t.Fatalf("submit to no listener: exit %d, stderr %q; want %d and never left", code, errs, exitUnavailable)
	}
}
