package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/writv1"
)

// TestOutboxFsyncFailureStopsNode (W2, W3, W10) runs 3 real writd nodes,
// kills two (no quorum: facts reported to the third wait in its outbox),
// reports facts to the survivor, then attaches strace to it failing every
// fsync and fdatasync of its outbox file with EIO, and reports one more
// fact. That fact must not be acknowledged: its record is in the file, so
// the answer is UNCERTAIN (gRPC DeadlineExceeded with the UNCERTAIN
// outcome detail), never UNAVAILABLE. The node must stop by itself with
// writd's fatal storage exit 1, one ERROR line naming the file, and the
// fatal line. Started again with the others, it commits every fact it
// acknowledged, on every node.
func TestOutboxFsyncFailureStopsNode(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test: skipped with -short")
	}
	if _, err := exec.LookPath("strace"); err != nil || os.Geteuid() != 0 {
		t.Skip("needs strace and root (to attach to writd): not run")
	}
	c := newCluster(t, "127.0.95.1", "127.0.95.2", "127.0.95.3")
	s := c.nodes[0]
	c.waitVoters(3, 60*time.Second)
	if _, err := submit(s, "worker.join", `{"worker_id":"w1","capacity":4}`, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	c.kill(c.nodes[1])
	c.kill(c.nodes[2])
	usage := func(i int) string {
		return fmt.Sprintf(`{"report_id":"u%d","worker_id":"w1","seq":%d,"cpu_millis":%d,"mem_bytes":1024}`, i, i, i*10)
	}
	const acked = 5
	for i := 1; i <= acked; i++ {
		if r, err := report(s, "worker.usage", usage(i)); err != nil || !r.Received {
			t.Fatalf("fact u%d not received without quorum: %v %v", i, r, err)
		}
	}
	outbox := filepath.Join(s.dir, "outbox", "outbox.log")
	stopTrace := injectFsyncEIO(t, s.pid(), outbox)
	defer stopTrace()

	_, err := report(s, "worker.usage", usage(acked+1))
	d, ok := api.OutcomeFromError(err)
	if !ok || d.Outcome != writv1.Outcome_UNCERTAIN || status.Code(err) != codes.DeadlineExceeded ||
		!strings.Contains(d.GetReason(), "may still commit") || !strings.Contains(d.GetReason(), "same ID") {
		t.Errorf("the fact whose outbox fsync failed: %v (detail %v), want UNCERTAIN: not acknowledged, may still commit", err, d)
	}
	t.Logf("u%d answered: %s: %s", acked+1, status.Code(err), d.GetReason())
	select {
	case <-s.exited():
	case <-time.After(30 * time.Second):
		t.Fatalf("%s still running 30s after its outbox fsync failed (W10: it stops and recovers from disk)", s.name)
	}
	stopTrace()
	log := readLog(t, s)
	if code := s.exitCode(); code != exitFatal {
		t.Fatalf("exit code %d, want %d (fatal storage error); log:\n%s", code, exitFatal, log)
	}
	checkOutboxFailureLog(t, log, outbox)

	for _, p := range c.nodes {
		c.start(p)
	}
	c.leader(60 * time.Second)
	c.waitReady(s, 60*time.Second)
	c.converge(60 * time.Second)
	for i := 1; i <= acked+1; i++ {
		id := fmt.Sprintf("fact:worker.usage:u%d", i)
		for _, p := range c.nodes {
			o, err := committedOutcome(p, id, 60*time.Second)
			switch {
			case i <= acked && err != nil:
				t.Errorf("%s: acknowledged fact %s not committed after the restart: %v", p.name, id, err)
			case i > acked:
				t.Logf("%s: the unacknowledged fact %s after the restart: %v %v", p.name, id, o, err)
			}
		}
	}
}

// checkOutboxFailureLog: exactly one ERROR line about the outbox, naming
// the file, the error and the stop; and writd's fatal line.
func checkOutboxFailureLog(t *testing.T, log, outbox string) {
	t.Helper()
	var errLines []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "level=ERROR") && strings.Contains(l, "outbox") {
			errLines = append(errLines, l)
		}
	}
	if len(errLines) != 1 || !strings.Contains(errLines[0], outbox) || !strings.Contains(errLines[0], "input/output error") ||
		!strings.Contains(errLines[0], "stops and recovers from disk on restart") {
		t.Errorf("want one ERROR line naming %s, the error and the stop; have:\n%s", outbox, strings.Join(errLines, "\n"))
	}
	want := "writd: fatal: fact outbox: pipeline: outbox failed: fsync " + outbox + ": input/output error: stopping; restart recovers from"
	if !strings.Contains(log, want) {
		t.Errorf("log lacks %q:\n%s", want, log)
	}
}

// committedOutcome waits until p answers id COMMITTED.
func committedOutcome(p *proc, id string, d time.Duration) (*writv1.OutcomeResponse, error) {
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		o, err := p.client.Outcome(ctx, &writv1.OutcomeRequest{RequestId: id})
		cancel()
		if err == nil && o.Known && o.Outcome == writv1.Outcome_COMMITTED {
			return o, nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("answered known=%t %s (%s)", o.Known, o.Outcome, o.Reason)
			}
			return o, err
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// injectFsyncEIO attaches strace to pid, failing every fsync and fdatasync
// on path with EIO, as the robustness suite's fail-fsync-outbox fault does.
// It returns once strace has attached; stop detaches it (idempotent).
func injectFsyncEIO(t *testing.T, pid int, path string) (stop func()) {
	t.Helper()
	cmd := exec.Command("strace", "-f", "-o", filepath.Join(t.TempDir(), "strace.log"), "-e", "signal=none",
		"-e", "trace=fsync,fdatasync", "-e", "inject=fsync,fdatasync:error=EIO", "-P", path, "-p", strconv.Itoa(pid))
	errp, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	attached, exited := make(chan struct{}), make(chan struct{})
	var said strings.Builder
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(errp)
		for sc.Scan() {
			said.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), " attached") && !isClosed(attached) {
				close(attached)
			}
		}
		_ = cmd.Wait()
	}()
	stop = func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	select {
	case <-attached:
		return stop
	case <-exited:
		t.Fatalf("strace exited before it attached: %s", said.String())
	case <-time.After(30 * time.Second):
		stop()
		t.Fatal("strace did not attach within 30s")
	}
	return nil
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
