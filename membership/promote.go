package membership

import (
	"context"
	"errors"
	"fmt"

	"github.com/writ-dev/writ/kv"
)

// ErrNotLeader is returned (wrapped) by Agent.Promote on a node that is not
// the raft leader; the caller should ask the leader.
var ErrNotLeader = errors.New("membership: not the raft leader")

// Promote makes learner id a voter at an operator's request. It runs on
// the leader and applies the reconciler's own conditions: id is a learner
// in the raft configuration, alive in gossip, not refused, announces the
// voter role, is caught up (within PromoteLag of the commit index), the
// voter cap allows one more, and, with peer TLS, its peer credentials
// verify. The change is logged like the reconciler's.
func (a *Agent) Promote(ctx context.Context, id string) error {
	a.mu.Lock()
	v := a.voters
	_, refused := a.refused[id]
	a.mu.Unlock()
	if v == nil || !v.IsLeader() {
		return fmt.Errorf("membership: promote %s: %w", id, ErrNotLeader)
	}
	p := a.policy()
	members := v.Members()
	voters, found := 0, false
	var match uint64
	var seat kv.Member
	for _, m := range members {
		if m.Voter {
			voters++
		}
		if m.ID != id {
			continue
		}
		found = true
		if m.Voter {
			return fmt.Errorf("membership: promote %s: it is already a voter", id)
		}
		match, seat = m.Match, m
	}
	if !found {
		return fmt.Errorf("membership: promote %s: not in the raft configuration: a node is admitted as a learner first (see writctl members)", id)
	}
	if refused {
		return fmt.Errorf("membership: promote %s: the node is refused (see the REFUSED list of writctl members)", id)
	}
	var g gossipMember
	for _, m := range a.gossip() {
		if m.Name == id {
			g = m
		}
	}
	if g.Status != GossipAlive {
		return fmt.Errorf("membership: promote %s: gossip reports it %s, not alive", id, orUnknown(g.Status))
	}
	if inc, old := staleIncarnation(p.self, seat, g, true); old {
		return fmt.Errorf("membership: promote %s: the configuration holds its earlier incarnation %s, and the node now runs %s: the leader removes the earlier one and adds the node again", id, formatIncarnation(seat.Incarnation), formatIncarnation(inc))
	}
	if g.Tags[TagRole] != RoleVoter {
		return fmt.Errorf("membership: promote %s: it announces role %q: only a node started with role voter is promoted", id, g.Tags[TagRole])
	}
	if p.maxVoters > 0 && voters >= p.maxVoters {
		return fmt.Errorf("membership: promote %s: the cluster has %d voters, the cap", id, voters)
	}
	if commit := commitIndex(v, members); match == 0 || match+p.promoteLag < commit {
		return fmt.Errorf("membership: promote %s: not caught up (match %d, commit %d): retry once it has replicated the log", id, match, commit)
	}
	cctx, cancel := context.WithTimeout(ctx, a.cfg.ChangeTimeout)
	defer cancel()
	var err error
	if pv, ok := v.(PeerVerifier); ok {
		err = pv.VerifyPeer(cctx, id, memberAddr(members, id))
	}
	if err == nil {
		err = v.Promote(cctx, id)
	}
	if err != nil {
		a.log.Warn("membership: configuration change failed", "action", actPromote.String(), "member", id, "reason", "operator request", "err", err)
		return fmt.Errorf("membership: promote %s: %w", id, err)
	}
	a.mu.Lock()
	a.lastChange = action{kind: actPromote, id: id, reason: "operator request"}.String()
	a.lastError = ""
	a.mu.Unlock()
	a.log.Info("membership: configuration changed", "action", actPromote.String(), "member", id, "reason", "operator request")
	a.kick()
	return nil
}
