package robustness

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// More fault kinds: every node at once, the node that last received a
// fact, and a bridge partition.
const (
	// KillAll SIGKILLs every node at once and restarts them all after
	// 0.3–1.8 s: nothing acknowledged may be lost with no node left up.
	KillAll = "kill-all"
	// KillReceiver SIGKILLs the node that most recently answered a fact
	// RECEIVED (its outbox may still hold it) and restarts it after
	// 0.3–1.8 s.
	KillReceiver = "kill-receiver"
	// PartitionBridge cuts the leader from one follower, both ways, while
	// both still reach the other follower (the bridge), for 3–5 election
	// timeouts (at least 1 s).
	PartitionBridge = "partition-bridge"
)

// killRestart SIGKILLs victims at once, waits 0.3–1.8 s and starts them
// again; it returns the wait.
func (ne *nemesis) killRestart(ctx context.Context, victims []*Node) (time.Duration, error) {
	var err error
	for _, n := range victims {
		if e := ne.cl.Kill(n); e != nil && err == nil {
			err = e
		}
	}
	d := time.Duration(300+ne.rng.IntN(1500)) * time.Millisecond
	sleepCtx(ctx, d)
	for _, n := range victims {
		if e := ne.cl.Start(n); e != nil && err == nil {
			err = e
		}
	}
	return d, err
}

// receiver is the node that last answered a fact RECEIVED in the history,
// if any did within the last 2 s and it is running.
func (ne *nemesis) receiver() (*Node, error) {
	ops := ne.h.Ops()
	for i := len(ops) - 1; i >= 0; i-- {
		op := ops[i]
		if op.Kind != "report" || op.Outcome != outReceived {
			continue
		}
		if ne.h.now()-op.End > int64(2*time.Second) {
			break
		}
		for _, n := range ne.cl.nodes {
			if n.Name == op.Node && n.Running() {
				return n, nil
			}
		}
	}
	return nil, fmt.Errorf("robustness: no running node answered a fact RECEIVED in the last 2 s")
}

// awaitReceiver is receiver, and when no node answered a fact RECEIVED in
// the last 2 s (the clients' facts are slow on a loaded machine, or none
// was drawn), it reports facts to a running node, up to 10 s, until one is
// received.
func (ne *nemesis) awaitReceiver(ctx context.Context) (*Node, error) {
	n, err := ne.receiver()
	if err == nil || ne.load == nil {
		return n, err
	}
	var to *Node
	for _, c := range ne.cl.nodes {
		if c.Running() {
			to = c
			break
		}
	}
	if to == nil {
		return nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); ne.load(lctx, to) }()
	defer func() { cancel(); <-done }()
	for lctx.Err() == nil {
		sleepCtx(lctx, 100*time.Millisecond)
		if n, rerr := ne.receiver(); rerr == nil {
			return n, nil
		}
	}
	return nil, fmt.Errorf("%w, nor in 10 s of facts reported to %s", err, to.Name)
}

// bridge cuts leader from follower both ways for 3–5 election timeouts
// and heals; the third node keeps reaching both.
func (ne *nemesis) bridge(ctx context.Context, leader, follower *Node) (time.Duration, error) {
	return ne.cut(ctx, []string{leader.Host}, []string{follower.Host}, true)
}

// either is the leader or the follower, drawn.
func (ne *nemesis) either(leader, follower *Node) *Node {
	if ne.rng.IntN(2) == 0 {
		return leader
	}
	return follower
}

// stop SIGSTOPs n for 2–3 election timeouts, then SIGCONTs it.
func (ne *nemesis) stop(ctx context.Context, n *Node) (time.Duration, error) {
	err := ne.cl.Pause(n)
	d := ne.hold(2, 3, 0)
	sleepCtx(ctx, d)
	return d, errors.Join(err, ne.cl.Resume(n))
}

// cut drops the packets from a to b (and back with both) for 3–5 election
// timeouts (at least 1 s), then heals.
func (ne *nemesis) cut(ctx context.Context, a, b []string, both bool) (time.Duration, error) {
	err := ne.fw.cut(a, b, both)
	d := ne.hold(3, 5, time.Second)
	sleepCtx(ctx, d)
	return d, errors.Join(err, ne.fw.heal())
}

// isolated cuts follower off for 4–6 election timeouts (at least 2 s;
// long enough for the isolated node's clients, whose other calls wait out
// their timeouts, to report facts), runs then on it still isolated, and
// heals 0.3 s later. It returns the isolation's hold, or then's when then
// says how long it held.
func (ne *nemesis) isolated(ctx context.Context, follower *Node, then func() (time.Duration, error)) (time.Duration, error) {
	// A node restarted by an earlier fault may still be joining; the
	// isolation is meant for a node that is up.
	if err := ne.cl.pc.WaitReady(ctx, follower.Node, 20*time.Second); err != nil {
		return 0, err
	}
	err := ne.fw.cut([]string{follower.Host}, hostsBut(ne.cl, follower), true)
	d := ne.hold(4, 6, 2*time.Second)
	sleepCtx(ctx, d)
	td, terr := then()
	if td > 0 {
		d = td
	}
	sleepCtx(ctx, 300*time.Millisecond)
	return d, errors.Join(err, terr, ne.fw.heal())
}

// killPlugin SIGKILLs victim's plugin processes once it is ready and
// waits until its plugin host started new ones (within 20 s: it restarts
// a crashed plugin with a backoff of 100 ms–5 s); it returns how long that
// took. Only a node that finished starting: writd exits (status 2,
// "plugin refused: describe failed") when its plugin dies during the
// start-up handshake instead of starting it again, a defect this nemesis
// found that is still open (docs/robustness.md).
func (ne *nemesis) killPlugin(ctx context.Context, victim *Node) (time.Duration, error) {
	if err := ne.cl.pc.WaitReady(ctx, victim.Node, 20*time.Second); err != nil {
		return 0, err
	}
	_, d, err := ne.cl.KillPlugins(ctx, victim, 20*time.Second)
	return d, err
}
