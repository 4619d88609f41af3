package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// benchProc is a writctl bench process running against a whole cluster.
type benchProc struct {
	cmd       *exec.Cmd
	out, errs bytes.Buffer
	exited    chan struct{} // closed when the process has been waited for
	err       error         // its exit, once exited is closed
}

// benchResult is the part of `writctl bench -o json` the tests read.
type benchResult struct {
	Ops         int            `json:"ops"`
	P99         float64        `json:"p99_ms"`
	MaxGap      float64        `json:"max_gap_ms"`
	Outcomes    map[string]int `json:"outcomes"`
	Retried     int            `json:"retried"`
	Resent      int            `json:"resent"`
	Interrupted bool           `json:"interrupted"`
}

// startBench starts `writctl bench -o json` with every node's API as its
// endpoints; stop ends it with SIGINT and returns its result.
func startBench(t *testing.T, c *cluster, args ...string) *benchProc {
	t.Helper()
	var eps []string
	for _, p := range c.nodes {
		eps = append(eps, p.api())
	}
	b := &benchProc{exited: make(chan struct{})}
	b.cmd = exec.Command(filepath.Join(c.bin, "writctl"), append([]string{"--addr", strings.Join(eps, ","), "--timeout", "10s", "-o", "json", "bench"}, args...)...)
	b.cmd.Stdout, b.cmd.Stderr = &b.out, &b.errs
	b.cmd.Env = cleanEnv()
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("writctl bench: %v", err)
	}
	go func() { b.err = b.cmd.Wait(); close(b.exited) }()
	return b
}

func (b *benchProc) stop(t *testing.T) benchResult {
	t.Helper()
	_ = b.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-b.exited:
	case <-time.After(90 * time.Second):
		b.kill()
		t.Fatalf("writctl bench did not stop within 90s of SIGINT; stderr: %s", b.errs.String())
	}
	var r benchResult
	if jerr := json.Unmarshal(b.out.Bytes(), &r); jerr != nil {
		t.Fatalf("writctl bench (exit %v): no JSON result (%v); stdout %q stderr %q", b.err, jerr, b.out.String(), b.errs.String())
	}
	if !r.Interrupted {
		t.Fatalf("writctl bench ended before it was interrupted: %+v", r)
	}
	if b.err != nil {
		t.Logf("writctl bench exit: %v; stderr: %s", b.err, b.errs.String())
	}
	return r
}

func (b *benchProc) kill() {
	select {
	case <-b.exited:
	default:
		_ = b.cmd.Process.Kill()
		<-b.exited
	}
}
