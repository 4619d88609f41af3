package robustness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Fault kinds on a node's disk: strace attached to its writd tampers with
// every fsync and fdatasync it makes.
const (
	// SlowFsync delays every fsync and fdatasync of a node (the leader or
	// a follower) by 5 ms to one election timeout for 3–5 election
	// timeouts, then detaches: the node must keep running and lose nothing.
	SlowFsync = "slow-fsync"
	// FailFsync fails every fsync and fdatasync of a node with EIO from a
	// moment on: the node must stop with writd's fatal exit (1), having
	// acknowledged nothing it could not make durable (a fact whose
	// outbox fsync failed is UNCERTAIN, never UNAVAILABLE), and recover
	// from disk when restarted.
	FailFsync = "fail-fsync"
	// FailFsyncOutbox fails only the fsyncs of the node's fact outbox
	// (<data dir>/outbox/outbox.log): the node must stop as on a WAL
	// failure (exit 1).
	FailFsyncOutbox = "fail-fsync-outbox"
	// FailFsyncIsolated isolates a follower for 4–6 election timeouts (at
	// least 2 s; facts reported to it wait in its outbox), then fails its
	// fsyncs as fail-fsync does, restarts it still isolated and heals 0.3 s
	// later: what it acknowledged must survive and commit once.
	FailFsyncIsolated = "fail-fsync-isolated"
)

// writd's exit codes (docs/operator.md): a fatal storage error (restart
// recovers from disk), and a node that could not start.
const (
	writdExitFatal = 1
	writdExitStart = 2
)

// fsyncStopWithin bounds how long a node whose fsyncs fail may take to
// stop: it fails at its next fsync (a follower under the workload's
// traffic makes several a second) and then shuts down.
const fsyncStopWithin = 20 * time.Second

func isFsync(kind string) bool {
	return kind == SlowFsync || kind == FailFsync || kind == FailFsyncOutbox || kind == FailFsyncIsolated
}

// FsyncFault is what a disk fault did, timed on the history's base.
type FsyncFault struct {
	Node string `json:"node"`
	// Inject is strace's injection: "error=EIO" or "delay_enter=…", and
	// the files it was limited to, if any.
	Inject string `json:"inject"`
	// Attached: strace said it had attached; every tampered call of the
	// node from then on fails or waits.
	Attached int64 `json:"attached_ns"`
	// Restarted: the nemesis restarted the stopped node (a failing
	// fault); calls answered before it were answered by the failing
	// process.
	Restarted int64 `json:"restarted_ns,omitempty"`
	// Tampered counts the calls strace failed or delayed.
	Tampered int `json:"tampered"`
	// Stopped: the node exited by itself within fsyncStopWithin (a
	// failing fault), with ExitCode; Said is its last fatal line.
	Stopped  bool   `json:"stopped,omitempty"`
	ExitCode int    `json:"exit_code,omitempty"`
	Said     string `json:"said,omitempty"`
	// Dropped is how many bytes of the outbox file written after the
	// failure began the nemesis cut off before the restart (see
	// dropUnsynced).
	Dropped int64 `json:"dropped_bytes,omitempty"`
}

// slowFsync delays every fsync of victim by a drawn delay for 3–5 election
// timeouts (at least 2 s), then detaches.
func (ne *nemesis) slowFsync(ctx context.Context, victim *Node) (time.Duration, *FsyncFault, error) {
	el := ne.cl.timing.Election()
	delay := []time.Duration{5 * time.Millisecond, 20 * time.Millisecond, 100 * time.Millisecond, el / 2, el}[ne.rng.IntN(5)]
	rec := &FsyncFault{Node: victim.Name, Inject: fmt.Sprintf("delay_enter=%dus", delay.Microseconds())}
	if err := ne.cl.pc.WaitReady(ctx, victim.Node, 20*time.Second); err != nil {
		return 0, rec, err
	}
	tr, err := attachStrace(ctx, victim.Pid(), ne.straceLog(victim), rec.Inject)
	if err != nil {
		return 0, rec, err
	}
	rec.Attached = ne.h.now()
	d := ne.hold(3, 5, 2*time.Second)
	sleepCtx(ctx, d)
	if tr.count("(DELAYED)") == 0 {
		// A loaded machine can leave the victim without a write it syncs
		// in the hold (strace attached late, traffic elsewhere): report
		// facts to it until one fsync is delayed, up to 10 s more.
		lctx, stopLoad := context.WithTimeout(ctx, 10*time.Second)
		go ne.load(lctx, victim)
		_ = poll(lctx, 10*time.Second, func() (bool, string) { return tr.count("(DELAYED)") > 0, "" })
		stopLoad()
	}
	err = tr.stop(10 * time.Second)
	rec.Tampered = tr.count("(DELAYED)")
	if err == nil && rec.Tampered == 0 {
		err = fmt.Errorf("robustness: no fsync of %s was delayed in %s and 10 s of facts reported to it", victim.Name, d.Round(time.Millisecond))
	}
	return d, rec, err
}

// failFsync fails every fsync of victim (only its outbox's with
// outboxOnly) with EIO until it stops, at most fsyncStopWithin, and then
// restarts it. A node still running then is stopped with SIGKILL before
// the restart; check fsync-error-stops fails the run for it. With ready
// the nemesis first waits until the victim is ready (an isolated node may
// not be). Half the time (drawn) the outbox bytes written after the
// failure began are dropped before the restart (dropUnsynced), the other
// half they are kept, as a process crash with the page cache intact keeps
// them.
func (ne *nemesis) failFsync(ctx context.Context, victim *Node, outboxOnly, ready bool) (time.Duration, *FsyncFault, error) {
	const eio = "error=EIO"
	rec := &FsyncFault{Node: victim.Name, Inject: eio}
	outbox := filepath.Join(victim.Dir, "outbox", "outbox.log")
	var paths []string
	if outboxOnly {
		paths = []string{outbox}
		rec.Inject += " on " + outbox
	}
	drop := ne.rng.IntN(2) == 0
	if ready {
		if err := ne.cl.pc.WaitReady(ctx, victim.Node, 20*time.Second); err != nil {
			return 0, rec, err
		}
	}
	if !victim.Running() {
		return 0, rec, fmt.Errorf("robustness: %s is not running", victim.Name)
	}
	victim.expectFatal(true)
	tr, err := attachStrace(ctx, victim.Pid(), ne.straceLog(victim), eio, paths...)
	if err != nil {
		victim.expectFatal(false)
		return 0, rec, err
	}
	rec.Attached = ne.h.now()
	synced := fileSize(outbox)
	t0 := time.Now()
	lctx, stopLoad := context.WithCancel(ctx)
	if ne.load != nil {
		// A node with nothing to write syncs nothing: an isolated follower
		// appends no entries, and its own clients may all be waiting out
		// timeouts on a loaded machine. After 2 s without an injected
		// failure, report facts to it until it stops.
		go func() {
			if poll(lctx, 2*time.Second, func() (bool, string) { return tr.count("(INJECTED)") > 0, "" }) == nil {
				return
			}
			ne.load(lctx, victim)
		}()
	}
	select {
	case <-victim.Done():
		rec.Stopped, rec.ExitCode = true, victim.ExitCode()
		tr.wait(10 * time.Second)
	case <-time.After(fsyncStopWithin):
		_ = tr.stop(10 * time.Second)
	case <-ctx.Done():
		_ = tr.stop(10 * time.Second)
	}
	stopLoad()
	d := time.Since(t0)
	rec.Tampered = tr.count("(INJECTED)")
	rec.Said = fatalLine(victim.Log)
	if !rec.Stopped {
		err = ne.cl.Kill(victim)
	}
	if drop {
		var derr error
		if rec.Dropped, derr = dropUnsynced(outbox, synced); derr != nil && err == nil {
			err = derr
		}
	}
	victim.expectFatal(false)
	rec.Restarted = ne.h.now()
	if e := ne.cl.Start(victim); e != nil && err == nil {
		err = e
	}
	if rec.Tampered == 0 && err == nil {
		err = fmt.Errorf("robustness: no fsync of %s hit the injected EIO within %s (facts reported to it after the first 2 s)", victim.Name, d.Round(time.Millisecond))
	}
	return d, rec, err
}

// fileSize is the size of path, -1 if it cannot be read.
func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return -1
	}
	return st.Size()
}

// dropUnsynced cuts the outbox file back to synced bytes, its size once
// strace had attached, and returns how many bytes it cut. Everything
// appended after that was followed only by fsyncs that failed: the page
// cache still holds it, but a disk that failed the fsync may not, so the
// nemesis drops it as a power loss after the EIO would. What a correct
// node acknowledged was fsync'd before the failure and is kept; a node
// that acknowledged a fact before its fsync loses it here (the
// ack-before-fsync canary). A record cut in half is a torn tail the outbox
// drops when it opens.
func dropUnsynced(path string, synced int64) (int64, error) {
	now := fileSize(path)
	if synced < 0 || now <= synced {
		return 0, nil
	}
	if err := os.Truncate(path, synced); err != nil {
		return 0, fmt.Errorf("robustness: drop the unsynced outbox tail: %w", err)
	}
	return now - synced, nil
}

// straceLog is a fresh strace output file for victim in the run directory.
func (ne *nemesis) straceLog(victim *Node) string {
	return filepath.Join(ne.dir, fmt.Sprintf("strace-%s-%d.log", victim.Name, ne.h.now()))
}

// fatalLine is the last one-line message writd printed when it stopped by
// itself ("writd: fatal: …", or why it could not start) in a node log
// ("" if none).
func fatalLine(log string) string {
	b, err := os.ReadFile(log)
	if err != nil {
		return ""
	}
	if len(b) > 64<<10 {
		b = b[len(b)-64<<10:]
	}
	last := ""
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "writd: ") && !strings.HasPrefix(l, "writd: SIG") {
			last = l
		}
	}
	if len(last) > 240 {
		last = last[:240] + "…"
	}
	return last
}
