package robustness

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/writ-dev/writ/api/writv1"
)

// ReplaceNode replaces a node (the leader or a follower) under traffic:
// SIGTERM (writd leaves the cluster: a leader hands leadership over first,
// and the leader removes the node from the raft configuration), its data
// directory wiped, then started again with the same name and addresses,
// joining through another node: it is added as a new member (a learner,
// then a voter) of a new incarnation and catches up, by snapshot or from
// log entries that hold its predecessor's removal (which once stopped it:
// docs/robustness.md, "Found by the suite", 5). SIGTERM leaves only once
// the node's fact outbox drained (6); exit 4, facts left, is a failure to
// inject. A stale gossip leave of the predecessor no longer removes the
// new incarnation (7).
const ReplaceNode = "replace-node"

// membershipWithin bounds each step of a membership change: the leave,
// the removal, the re-admission as a voter.
const membershipWithin = 60 * time.Second

// replaceNode runs ReplaceNode on victim and returns how long the node
// was out of the voters.
func (ne *nemesis) replaceNode(ctx context.Context, victim *Node) (time.Duration, error) {
	if err := ne.cl.pc.WaitReady(ctx, victim.Node, 20*time.Second); err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := victim.Signal(syscall.SIGTERM); err != nil {
		return 0, fmt.Errorf("robustness: %w", err)
	}
	select {
	case <-victim.Done():
	case <-time.After(membershipWithin):
		_ = ne.cl.Kill(victim)
		return time.Since(t0), fmt.Errorf("robustness: %s did not leave within %s of SIGTERM", victim.Name, membershipWithin)
	}
	if code := victim.ExitCode(); code != 0 {
		return time.Since(t0), fmt.Errorf("robustness: %s exited with code %d on SIGTERM, not 0 (left)", victim.Name, code)
	}
	if err := ne.cl.waitRole(ctx, victim, "", membershipWithin); err != nil {
		return time.Since(t0), err
	}
	if err := os.RemoveAll(victim.Dir); err != nil {
		return time.Since(t0), fmt.Errorf("robustness: wipe %s: %w", victim.Name, err)
	}
	victim.mu.Lock()
	victim.wiped = true
	victim.mu.Unlock()
	if err := ne.cl.Start(victim); err != nil {
		return time.Since(t0), err
	}
	if err := ne.cl.waitRole(ctx, victim, "voter", membershipWithin); err != nil {
		return time.Since(t0), err
	}
	return time.Since(t0), ne.cl.pc.WaitReady(ctx, victim.Node, membershipWithin)
}

// waitRole waits until the ready leader (any other node) lists n with role
// ("" for not a member of the raft configuration).
func (c *Cluster) waitRole(ctx context.Context, n *Node, role string, d time.Duration) error {
	err := poll(ctx, d, func() (bool, string) {
		l, err := c.Leader(ctx, 2*time.Second)
		if err != nil {
			return false, err.Error()
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		m, err := l.client.Members(cctx, &writv1.MembersRequest{})
		if err != nil {
			return false, err.Error()
		}
		got := ""
		var all []string
		for _, x := range m.Members {
			all = append(all, x.Id+"="+x.Role)
			if x.Id == n.Name {
				got = x.Role
			}
		}
		return got == role, fmt.Sprintf("%s lists %s", l.Name, strings.Join(all, " "))
	})
	if err != nil {
		return fmt.Errorf("robustness: %s not %q: %w", n.Name, role, err)
	}
	return nil
}
