package robustness

import (
	"context"
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

// bridge cuts leader from follower both ways for 3–5 election timeouts
// and heals; the third node keeps reaching both.
func (ne *nemesis) bridge(ctx context.Context, leader, follower *Node) (time.Duration, error) {
	err := ne.fw.cut([]string{leader.Host}, []string{follower.Host}, true)
	d := ne.hold(3, 5, time.Second)
	sleepCtx(ctx, d)
	if e := ne.fw.heal(); e != nil && err == nil {
		err = e
	}
	return d, err
}
