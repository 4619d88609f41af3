package robustness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
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

// AddRemoveMember adds a member under traffic and removes it again: a
// writd on the run's spare address (the one after the cluster's last),
// with a fresh data directory and a name of its own, joins through
// another node (a learner, then a voter that caught up); while the
// cluster is four voters (a quorum of three) for 4–8 election timeouts,
// at least 2 s, facts are reported to the new member (at least one must
// be acknowledged, or the fault was not injected); then SIGTERM: it
// drains its outbox, leaves, and the leader removes it from the raft
// configuration. Its facts are checked like every other (committed once
// on every remaining node), and its exit must be 0 with no panic in its
// log.
const AddRemoveMember = "add-remove-member"

// addRemoveMember runs AddRemoveMember and returns the member it added
// and how long it was in the cluster.
func (ne *nemesis) addRemoveMember(ctx context.Context, received *int) (*Node, time.Duration, error) {
	c := ne.cl
	if c.spare == "" {
		return nil, 0, errors.New("robustness: no spare address for a member to add")
	}
	c.added++
	n, err := c.newNode("n"+strconv.Itoa(len(c.nodes)+c.added), c.spare)
	if err != nil {
		return nil, 0, err
	}
	n.wiped = true // a new member joins through another node
	t0 := time.Now()
	if err := c.Start(n); err != nil {
		return n, 0, err
	}
	fail := func(err error) (*Node, time.Duration, error) {
		if n.Running() {
			_ = c.Kill(n)
		}
		return n, time.Since(t0), err
	}
	if err := c.waitRole(ctx, n, "voter", membershipWithin); err != nil {
		return fail(err)
	}
	if err := c.pc.WaitReady(ctx, n.Node, membershipWithin); err != nil {
		return fail(fmt.Errorf("robustness: %w", err))
	}
	if ne.load == nil {
		return fail(errors.New("robustness: add-remove-member needs the workload's load to report facts to the new member"))
	}
	lctx, cancel := context.WithTimeout(ctx, ne.hold(4, 8, 2*time.Second))
	ne.load(lctx, n)
	cancel()
	for _, op := range ne.h.Ops() {
		if op.Node == n.Name && op.Kind == "report" && op.Outcome == outReceived {
			*received++
		}
	}
	if *received == 0 {
		// The fault is meant to hold the new member to W3 as it leaves.
		return fail(fmt.Errorf("robustness: %s, a voter, acknowledged none of the facts reported to it", n.Name))
	}
	if err := n.Signal(syscall.SIGTERM); err != nil {
		return fail(fmt.Errorf("robustness: %w", err))
	}
	select {
	case <-n.Done():
	case <-time.After(membershipWithin):
		return fail(fmt.Errorf("robustness: %s did not leave within %s of SIGTERM", n.Name, membershipWithin))
	}
	if code := n.ExitCode(); code != 0 {
		return n, time.Since(t0), fmt.Errorf("robustness: %s exited with code %d on SIGTERM, not 0 (left)", n.Name, code)
	}
	if err := c.waitRole(ctx, n, "", membershipWithin); err != nil {
		return n, time.Since(t0), err
	}
	if bad := crashIn(n.Log); bad != "" {
		return n, time.Since(t0), fmt.Errorf("robustness: %s%s", n.Name, bad)
	}
	return n, time.Since(t0), nil
}

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
