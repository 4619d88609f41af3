package pipeline_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/pipeline/pipelinetest"
)

// The outbox's file failing a write or an fsync (W2, W3, W10): a fact whose
// record may have reached the file is answered UNCERTAIN, never
// UNAVAILABLE ("nothing appended"), because the node reloads the file when
// it starts again and commits what it finds; a fact refused once the
// outbox failed is UNAVAILABLE (nothing of it written); one ERROR line
// names the file and the error; the pipeline signals the node to stop; and
// after a restart on the same directory every acknowledged fact commits.

// lockedBuf collects log output written from several goroutines.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// failingDisk is a fake of the outbox file's failures over the real file:
// from fail on, a write transfers writeN bytes of its record (-1: all) and
// returns EIO, or an fsync returns EIO without syncing.
type failingDisk struct {
	mu         sync.Mutex
	failWrite  bool
	writeN     int
	failFsync  bool
	writes     int
	fsyncsDone int
}

func (d *failingDisk) write(f *os.File, b []byte) (int, error) {
	d.mu.Lock()
	fail, n := d.failWrite, d.writeN
	d.writes++
	d.mu.Unlock()
	if !fail {
		return f.Write(b)
	}
	if n < 0 || n > len(b) {
		n = len(b)
	}
	w, err := f.Write(b[:n])
	if err != nil {
		return w, err
	}
	return w, &fs.PathError{Op: "write", Path: f.Name(), Err: syscall.EIO}
}

func (d *failingDisk) sync(f *os.File) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failFsync {
		return &fs.PathError{Op: "sync", Path: f.Name(), Err: syscall.EIO}
	}
	d.fsyncsDone++
	return f.Sync()
}

// outboxNode is one pipeline over a fake log, with its outbox on a
// failing disk in dir, never committing (the facts stay in the outbox as
// on a node without quorum).
type outboxNode struct {
	p    *pipeline.Pipeline
	ob   *pipeline.Outbox
	disk *failingDisk
	logs *lockedBuf
}

func startFakeOutboxNode(t *testing.T, dir string) *outboxNode {
	t.Helper()
	ob, _, err := pipeline.OpenOutbox(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ob.Close() })
	n := &outboxNode{ob: ob, disk: &failingDisk{}, logs: &lockedBuf{}}
	pipeline.FakeOutboxIO(ob, n.disk.write, n.disk.sync)
	n.p = startOnFakeLog(t, pipelinetest.NewFakeLog(), pipeline.Config{Catalog: pipelinetest.FakeCatalog(), Evaluator: pipelinetest.NewFakeEvaluator(),
		Manual: true, Outbox: ob, Logger: slog.New(slog.NewTextHandler(n.logs, nil))})
	return n
}

func (n *outboxNode) report(id string) pipeline.Ack {
	return n.p.Report(context.Background(), pipeline.Entry{Type: "job.state_report",
		Payload: []byte(fmt.Sprintf(`{"report_id":%q,"job_id":"j-%s","state":"RUNNING","seq":1}`, id, id))})
}

// stop stops the pipeline and closes its outbox, as the node's stop does.
func (n *outboxNode) stop(t *testing.T) {
	t.Helper()
	if err := n.p.Stop(); err != nil {
		t.Fatal(err)
	}
	n.ob.Close()
}

// mustHaveFailed checks the stop signal and the one ERROR line.
func (n *outboxNode) mustHaveFailed(t *testing.T, op string) {
	t.Helper()
	select {
	case <-n.p.OutboxFailed():
	default:
		t.Fatal("the outbox failed but OutboxFailed is not closed: nothing tells the node to stop (W10)")
	}
	var oe *pipeline.OutboxError
	if err := n.p.OutboxErr(); !errors.As(err, &oe) || oe.Op != op || !errors.Is(err, syscall.EIO) || filepath.Base(oe.Path) != "outbox.log" {
		t.Fatalf("OutboxErr = %v, want the %s of outbox.log failing with EIO", err, op)
	}
	var errs []string
	for _, l := range strings.Split(n.logs.String(), "\n") {
		if strings.Contains(l, "level=ERROR") {
			errs = append(errs, l)
		}
	}
	if len(errs) != 1 || !strings.Contains(errs[0], "outbox.log") || !strings.Contains(errs[0], "input/output error") ||
		!strings.Contains(errs[0], "stops and recovers from disk on restart") {
		t.Fatalf("want one ERROR line naming the file, the error and the stop; have %d:\n%s", len(errs), strings.Join(errs, "\n"))
	}
}

func mustBeUncertain(t *testing.T, what string, a pipeline.Ack) {
	t.Helper()
	if a.Received || a.Status != pipeline.StatusUncertain || !strings.Contains(a.Reason, "may still commit") ||
		!strings.Contains(a.Reason, "same ID") || !strings.Contains(a.Reason, "input/output error") {
		t.Fatalf("%s: %+v, want not received, UNCERTAIN: its record may be in the file, and the restarted node commits it", what, a)
	}
}

// restartCommits starts a pipeline on dir again (a fresh log) and returns
// which of ids committed once every retained fact was proposed.
func restartCommits(t *testing.T, dir string, ids ...string) map[string]bool {
	t.Helper()
	log := pipelinetest.NewFakeLog()
	p := startOnFakeLog(t, log, pipeline.Config{Catalog: pipelinetest.FakeCatalog(), Evaluator: pipelinetest.NewFakeEvaluator(), Manual: true, DataDir: dir})
	ctx := context.Background()
	for range 10 {
		p.Flush(ctx)
		for log.CommitNext() {
		}
	}
	out := map[string]bool{}
	for _, id := range ids {
		r, ok := log.Outcome("fact:job.state_report:" + id)
		out[id] = ok && r.Index > 0
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOutboxWriteFails_FakeDisk: the write of a fact's record fails after
// transferring it (the bytes are in the file): UNCERTAIN, the node is told
// to stop, and the restarted node commits the fact. A write that
// transferred nothing leaves nothing to commit: that fact is UNAVAILABLE.
func TestOutboxWriteFails_FakeDisk(t *testing.T) {
	for _, c := range []struct {
		name      string
		writeN    int
		uncertain bool
	}{
		{"whole record written", -1, true},
		{"part of the record written", 5, true},
		{"nothing written", 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			n := startFakeOutboxNode(t, dir)
			if a := n.report("acked"); !a.Received {
				t.Fatalf("before the failure: %+v", a)
			}
			n.disk.mu.Lock()
			n.disk.failWrite, n.disk.writeN = true, c.writeN
			n.disk.mu.Unlock()
			a := n.report("failed")
			if c.uncertain {
				mustBeUncertain(t, "the fact whose write failed", a)
			} else if a.Received || a.Status != pipeline.StatusUnavailable || !strings.Contains(a.Reason, "nothing of this fact was written") {
				t.Fatalf("a write that transferred nothing: %+v, want UNAVAILABLE, nothing written", a)
			}
			n.mustHaveFailed(t, "write")
			n.stop(t)
			got := restartCommits(t, dir, "acked", "failed")
			if !got["acked"] {
				t.Fatal("the fact acknowledged before the failure did not commit after the restart")
			}
			if got["failed"] && !c.uncertain {
				t.Fatal("a fact answered UNAVAILABLE (nothing written) committed after the restart")
			}
			t.Logf("the fact whose write failed committed after the restart: %t", got["failed"])
		})
	}
}

// TestOutboxFsyncFails_FakeDisk: the fsync of a fact's record fails; the
// record stays in the file (the page cache): UNCERTAIN (the pre-fix answer
// was UNAVAILABLE "nothing was appended"), the node is told to stop, and
// after a restart the fact commits, as does the one acknowledged before.
func TestOutboxFsyncFails_FakeDisk(t *testing.T) {
	dir := t.TempDir()
	n := startFakeOutboxNode(t, dir)
	if a := n.report("acked"); !a.Received {
		t.Fatalf("before the failure: %+v", a)
	}
	n.disk.mu.Lock()
	n.disk.failFsync = true
	n.disk.mu.Unlock()
	mustBeUncertain(t, "the fact whose fsync failed", n.report("failed"))
	n.mustHaveFailed(t, "fsync")
	n.stop(t)
	got := restartCommits(t, dir, "acked", "failed")
	if !got["acked"] || !got["failed"] {
		t.Fatalf("after the restart: committed %v, want both (the failed fsync's record was in the file)", got)
	}
}

// TestOutboxReportAfterFailure_FakeDisk: once the outbox failed, reporting
// the fact whose fsync failed again is still UNCERTAIN (its record is in
// the file: the retry must not hear "nothing appended"), a new fact is
// UNAVAILABLE with nothing of it written (even with the disk healthy
// again: the outbox stays failed until the restart), a fact acknowledged
// before is received again (it is durable), and nothing more is logged at
// ERROR. After the restart the new fact is absent, the others commit.
func TestOutboxReportAfterFailure_FakeDisk(t *testing.T) {
	dir := t.TempDir()
	n := startFakeOutboxNode(t, dir)
	if a := n.report("acked"); !a.Received {
		t.Fatalf("before the failure: %+v", a)
	}
	n.disk.mu.Lock()
	n.disk.failFsync = true
	n.disk.mu.Unlock()
	mustBeUncertain(t, "the fact whose fsync failed", n.report("failed"))
	n.disk.mu.Lock()
	n.disk.failFsync = false
	writes := n.disk.writes
	n.disk.mu.Unlock()
	again := n.report("failed")
	mustBeUncertain(t, "the same fact reported again", again)
	t.Logf("the failed fact reported again: %s", again.Reason)
	a := n.report("later")
	if a.Received || a.Status != pipeline.StatusUnavailable || !strings.Contains(a.Reason, "nothing of this fact was written") ||
		!strings.Contains(a.Reason, "another node") {
		t.Fatalf("a new fact after the failure: %+v, want UNAVAILABLE, nothing of it written", a)
	}
	if a := n.report("acked"); !a.Received {
		t.Fatalf("the fact acknowledged before the failure, reported again: %+v, want received (it is durable)", a)
	}
	n.disk.mu.Lock()
	if n.disk.writes != writes {
		t.Fatalf("the failed outbox wrote %d more records", n.disk.writes-writes)
	}
	n.disk.mu.Unlock()
	n.mustHaveFailed(t, "fsync")
	n.stop(t)
	got := restartCommits(t, dir, "acked", "failed", "later")
	if !got["acked"] || got["later"] {
		t.Fatalf("after the restart: committed %v, want acked and not later", got)
	}
	t.Logf("after the restart: %v; the new fact's answer: %s", got, a.Reason)
}

// TestOutboxGroupFsyncFailure_FakeDisk: writers sharing one failed fsync
// are all answered UNCERTAIN (each one's record was written), none
// received, and the failure is logged once.
func TestOutboxGroupFsyncFailure_FakeDisk(t *testing.T) {
	n := startFakeOutboxNode(t, t.TempDir())
	pipeline.FakeOutboxIO(n.ob, nil, func(*os.File) error { time.Sleep(time.Millisecond); return syscall.EIO })
	var wg sync.WaitGroup
	acks := make([]pipeline.Ack, 16)
	for i := range acks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			acks[i] = n.report(fmt.Sprintf("g%d", i))
		}()
	}
	wg.Wait()
	for i, a := range acks {
		if a.Received || (a.Status != pipeline.StatusUncertain && a.Status != pipeline.StatusUnavailable) {
			t.Fatalf("report %d: %+v", i, a)
		}
		if a.Status == pipeline.StatusUnavailable && !strings.Contains(a.Reason, "nothing of this fact was written") {
			t.Fatalf("report %d: %+v", i, a)
		}
	}
	select {
	case <-n.p.OutboxFailed():
	default:
		t.Fatal("OutboxFailed not closed")
	}
	if c := strings.Count(n.logs.String(), "level=ERROR"); c != 1 {
		t.Fatalf("%d ERROR lines, want 1:\n%s", c, n.logs.String())
	}
}
