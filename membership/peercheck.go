package membership

import (
	"context"
	"time"

	"github.com/writ-dev/writ/kv"
)

// PeerVerifier is optionally implemented by a Voters: before a node is
// added as a learner or promoted to voter, the leader proves that the node
// listening at its raft address holds the peer credentials of its ID (with
// peer TLS: a certificate from the cluster CA naming that ID). The gossip
// key alone admits nobody. An error refuses the node, with the error as
// the reason.
type PeerVerifier interface {
	VerifyPeer(ctx context.Context, id, raftAddr string) error
}

const (
	// peerCheckTimeout bounds one probe.
	peerCheckTimeout = 2 * time.Second
	// peerRecheck is how long a probe result is kept before a node is
	// probed again.
	peerRecheck = 5 * time.Second
)

type peerCheck struct {
	addr   string
	at     time.Time
	reason string // "" = verified
}

// checkPeers probes the live gossip members that are candidates for the
// raft configuration (alive, not in it, not refused for another reason)
// and returns the refusal reason of each that fails.
func (a *Agent) checkPeers(v Voters, p policy, now time.Time, gossip []gossipMember, members []kv.Member, other map[string]string) map[string]string {
	pv, ok := v.(PeerVerifier)
	if !ok {
		return nil
	}
	inRaft := make(map[string]bool, len(members))
	for _, m := range members {
		inRaft[m.ID] = true
	}
	out := map[string]string{}
	for _, g := range gossip {
		if g.Status != GossipAlive || inRaft[g.Name] || g.Name == p.self {
			continue
		}
		if _, bad := other[g.Name]; bad {
			continue
		}
		if r := a.verifyPeer(pv, now, g.Name, g.Tags[TagRaftAddr]); r != "" {
			out[g.Name] = r
		}
	}
	return out
}

// verifyPeer probes one node, reusing a recent result for the same
// address; it returns the refusal reason ("" = verified).
func (a *Agent) verifyPeer(pv PeerVerifier, now time.Time, id, addr string) string {
	a.mu.Lock()
	c, ok := a.peerChecks[id]
	a.mu.Unlock()
	if ok && c.addr == addr && now.Sub(c.at) < peerRecheck {
		return c.reason
	}
	ctx, cancel := context.WithTimeout(context.Background(), peerCheckTimeout)
	defer cancel()
	reason := ""
	if err := pv.VerifyPeer(ctx, id, addr); err != nil {
		reason = "peer credentials not verified: " + err.Error()
	}
	a.mu.Lock()
	a.peerChecks[id] = peerCheck{addr: addr, at: now, reason: reason}
	a.mu.Unlock()
	return reason
}

// memberAddr is the raft address of member id ("" if unknown).
func memberAddr(members []kv.Member, id string) string {
	for _, m := range members {
		if m.ID == id {
			return m.RaftAddr
		}
	}
	return ""
}
