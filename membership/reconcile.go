package membership

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/writ-dev/writ/kv"
)

// Voters is what the reconciler needs from the consensus layer. The raft
// node satisfies it; the reconciler calls the mutating methods only while
// IsLeader reports true, and never more than one at a time.
type Voters interface {
	// IsLeader reports whether this node is the raft leader.
	IsLeader() bool
	// Members is the current raft configuration; on the leader Match is the
	// leader's view of each member's replicated index.
	Members() []kv.Member
	// AddLearner adds a non-voting member and returns once the change is
	// committed and applied.
	AddLearner(ctx context.Context, id, raftAddr string) error
	// Promote turns a learner into a voter.
	Promote(ctx context.Context, id string) error
	// Remove takes a member out of the configuration.
	Remove(ctx context.Context, id string) error
}

// IncarnationVoters is optionally implemented by a Voters whose members
// carry an incarnation: a number that identifies a node's data directory,
// so that a node rebuilt under its old ID (a new, empty data directory) is
// told apart from its predecessor, whose raft ID it shares. The agent
// announces Incarnation in its inc tag and adds a node with the
// incarnation its tag names; kv.Member.Incarnation reports what the
// configuration recorded.
type IncarnationVoters interface {
	// Incarnation is this node's incarnation (0: none).
	Incarnation() uint64
	// AddLearnerIncarnation is AddLearner recording the member's
	// incarnation.
	AddLearnerIncarnation(ctx context.Context, id, raftAddr string, incarnation uint64) error
}

// CommitIndexer is optionally implemented by a Voters: the leader's commit
// index, used to decide that a learner has caught up. Without it the
// reconciler uses the highest Match among voters.
type CommitIndexer interface {
	CommitIndex() uint64
}

// Gossip statuses as shown in View.
const (
	GossipAlive   = "alive"
	GossipLeaving = "leaving"
	GossipLeft    = "left"
	GossipFailed  = "failed"
	GossipUnknown = "" // in the raft configuration but not known to gossip
)

// gossipMember is the reconciler's view of one serf member.
type gossipMember struct {
	Name   string
	Addr   string
	Status string
	Tags   map[string]string
}

// Refusal is a node that gossips with the cluster but is not admitted to the
// raft configuration.
type Refusal struct {
	ID          string    `json:"id"`
	Addr        string    `json:"addr"`
	RaftAddr    string    `json:"raft_addr,omitempty"`
	Fingerprint string    `json:"fingerprint,omitempty"`
	Reason      string    `json:"reason"`
	Since       time.Time `json:"since"`
}

type actionKind int

const (
	actNone actionKind = iota
	actAddLearner
	actPromote
	actRemove
)

func (k actionKind) String() string {
	switch k {
	case actAddLearner:
		return "add-learner"
	case actPromote:
		return "promote"
	case actRemove:
		return "remove"
	}
	return "none"
}

type action struct {
	kind     actionKind
	id       string
	raftAddr string
	inc      uint64 // add-learner: the incarnation the node announces
	reason   string
}

func (a action) String() string {
	return fmt.Sprintf("%s %s (%s)", a.kind, a.id, a.reason)
}

// policy is the part of Config the decision needs.
type policy struct {
	self        string
	fingerprint string
	compatible  func(local, remote string) error
	admit       AdmitFunc
	// gossipByName is set by refusals for judge.
	gossipByName map[string]gossipMember
	grace        time.Duration
	// unknownGrace applies to raft members absent from gossip altogether.
	unknownGrace time.Duration
	// leftGrace is how long a member must have been seen not alive, and
	// "left" now, before it is removed as having left: a node rebuilt
	// under its name right after its predecessor left can be reported
	// left by that predecessor's stale leave until it refutes it (five
	// probe intervals, at least 2 s: 2 s in the local profile, 5 s in lan).
	leftGrace  time.Duration
	promoteLag uint64
	maxVoters  int
	// manualPromote leaves learners for an operator to promote.
	manualPromote bool
}

func quorum(n int) int { return n/2 + 1 }

// refusals returns, for every live gossip member that is not in the raft
// configuration, why it may not be admitted (members absent from the result
// are admissible).
func refusals(p policy, gossip []gossipMember, raft []kv.Member) map[string]string {
	inRaft := make(map[string]kv.Member, len(raft))
	raftAddrOwner := make(map[string]string, len(raft))
	for _, m := range raft {
		inRaft[m.ID] = m
		raftAddrOwner[m.RaftAddr] = m.ID
	}
	p.gossipByName = make(map[string]gossipMember, len(gossip))
	for _, g := range gossip {
		p.gossipByName[g.Name] = g
	}
	out := make(map[string]string)
	// Members restarted on a refused schema are judged first and left out
	// of the peers every later candidate is judged against, so that one
	// bad member cannot narrow what the cluster is taken to run.
	refuseMembers(p, gossip, raft, out)
	for _, g := range gossip {
		if g.Status != GossipAlive {
			continue
		}
		if _, ok := inRaft[g.Name]; ok {
			continue
		}
		if id := g.Tags[TagID]; id != g.Name {
			out[g.Name] = fmt.Sprintf("tag %q is %q but the gossip name is %q: not a writ node or misconfigured", TagID, id, g.Name)
			continue
		}
		ra := g.Tags[TagRaftAddr]
		if ra == "" {
			out[g.Name] = fmt.Sprintf("tag %q (raft address) is missing", TagRaftAddr)
			continue
		}
		if owner, ok := raftAddrOwner[ra]; ok {
			out[g.Name] = fmt.Sprintf("raft address %s is already used by member %s", ra, owner)
			continue
		}
		if _, err := tagIncarnation(g.Tags); err != nil {
			out[g.Name] = err.Error()
			continue
		}
		if role := g.Tags[TagRole]; role != RoleVoter && role != RoleLearner {
			out[g.Name] = fmt.Sprintf("role %q is unknown (want %q or %q)", role, RoleVoter, RoleLearner)
			continue
		}
		if err := p.judge(g, raft, false, out); err != nil {
			out[g.Name] = refusedSchemaPrefix + err.Error()
			continue
		}
	}
	return out
}

// decide picks the single next configuration change, or actNone. It is a
// pure function of its inputs so that it can be tested exhaustively.
// failedSince records when each raft member was first seen not alive.
func decide(p policy, now time.Time, gossip []gossipMember, raft []kv.Member, commit uint64, failedSince map[string]time.Time, refused map[string]string) (action, string) {
	byName := make(map[string]gossipMember, len(gossip))
	for _, g := range gossip {
		byName[g.Name] = g
	}
	incOf := make(map[string]uint64, len(raft))
	for _, m := range raft {
		incOf[m.ID] = m.Incarnation
	}
	status := func(id string) string {
		if id == p.self {
			return GossipAlive
		}
		g, ok := byName[id]
		if !ok {
			return GossipUnknown
		}
		if otherIncarnation(g, incOf[id]) {
			return GossipUnknown
		}
		return g.Status
	}
	alive := func(id string) bool {
		s := status(id)
		return s == GossipAlive || s == GossipLeaving
	}
	stale := func(m kv.Member) (uint64, bool) {
		g, ok := byName[m.ID]
		return staleIncarnation(p.self, m, g, ok)
	}
	voters, aliveVoters := 0, 0
	for _, m := range raft {
		if m.Voter {
			voters++
			// An earlier incarnation's data directory is gone: it is not
			// alive, whatever gossip says of its name.
			if _, old := stale(m); alive(m.ID) && !old {
				aliveVoters++
			}
		}
	}
	// A removal must be committed by a majority of the current voters; when
	// the live voters cannot form one, no member is removed. Since a removed
	// member is never alive, this also guarantees the remaining voters form
	// a majority of the new configuration. (Adding or promoting a live node
	// never lowers the live fraction, and raft itself refuses to commit
	// without a quorum.)
	canRemove := aliveVoters >= quorum(voters)
	note := ""
	if !canRemove {
		note = fmt.Sprintf("waiting: only %d of %d voters are alive, a removal needs %d", aliveVoters, voters, quorum(voters))
	}

	sorted := append([]kv.Member(nil), raft...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].ID < sorted[j].ID })

	// 1. Members that left gracefully.
	for _, m := range sorted {
		if m.ID == p.self || !canRemove {
			continue
		}
		if status(m.ID) == GossipLeft {
			since, ok := failedSince[m.ID]
			if !ok {
				since = now
			}
			if wait := p.leftGrace - now.Sub(since); wait > 0 {
				if note == "" {
					note = fmt.Sprintf("waiting: %s is reported left; it is removed in %s unless it is alive again (a stale leave of an earlier incarnation)", m.ID, wait.Round(time.Millisecond))
				}
				continue
			}
			return action{kind: actRemove, id: m.ID, reason: "left the cluster"}, ""
		}
	}
	// 1b. Earlier incarnations of a node rebuilt under its own name.
	if act, ok := removeStale(sorted, canRemove, stale); ok {
		return act, ""
	}
	// 2. Failed members past the grace period; learners first.
	for _, wantVoter := range []bool{false, true} {
		if !canRemove {
			break
		}
		for _, m := range sorted {
			if m.ID == p.self || m.Voter != wantVoter || alive(m.ID) {
				continue
			}
			since, ok := failedSince[m.ID]
			if !ok {
				continue
			}
			// A member this node's gossip has never heard of may simply not
			// have reached it yet (a missed broadcast waits for the next
			// anti-entropy round), so it gets a longer grace.
			grace := p.grace
			if status(m.ID) == GossipUnknown {
				grace = p.unknownGrace
			}
			if wait := grace - now.Sub(since); wait > 0 {
				if note == "" {
					note = fmt.Sprintf("waiting: %s is %s, removal in %s", m.ID, orUnknown(status(m.ID)), wait.Round(time.Millisecond))
				}
				continue
			}
			return action{kind: actRemove, id: m.ID, reason: fmt.Sprintf("%s for %s (grace %s)", orUnknown(status(m.ID)), now.Sub(since).Round(time.Millisecond), grace)}, ""
		}
	}
	// 3. Promote a caught-up learner that wants to vote (unless an
	// operator promotes: then only say who is waiting).
	if p.manualPromote {
		for _, m := range sorted {
			if !m.Voter && m.ID != p.self && byName[m.ID].Tags[TagRole] == RoleVoter && note == "" {
				note = fmt.Sprintf("waiting: learner %s awaits an operator's promotion (membership.auto_promote is false): writctl members promote %s", m.ID, m.ID)
			}
		}
	} else if p.maxVoters == 0 || voters < p.maxVoters {
		for _, m := range sorted {
			if m.Voter || status(m.ID) != GossipAlive {
				continue
			}
			g := byName[m.ID]
			if m.ID != p.self && g.Tags[TagRole] != RoleVoter {
				continue
			}
			if _, bad := refused[m.ID]; bad {
				continue
			}
			if _, old := stale(m); old {
				continue
			}
			if m.Match == 0 || m.Match+p.promoteLag < commit {
				if note == "" {
					note = fmt.Sprintf("waiting: learner %s at %d, commit %d", m.ID, m.Match, commit)
				}
				continue
			}
			return action{kind: actPromote, id: m.ID, reason: fmt.Sprintf("caught up (match %d, commit %d)", m.Match, commit)}, ""
		}
	}
	// 4. Admit new compatible nodes as learners.
	inRaft := make(map[string]bool, len(raft))
	for _, m := range raft {
		inRaft[m.ID] = true
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		g := byName[n]
		if g.Status != GossipAlive || inRaft[n] || n == p.self {
			continue
		}
		if _, bad := refused[n]; bad {
			continue
		}
		inc, _ := tagIncarnation(g.Tags) // refusals refused a malformed one
		return action{kind: actAddLearner, id: n, raftAddr: g.Tags[TagRaftAddr], inc: inc, reason: "new alive member"}, ""
	}
	return action{}, note
}

// removeStale picks the removal of an earlier incarnation of a node that
// now runs with a new data directory under the same name, learners first:
// the seat must be emptied before the new incarnation is added, since it
// shares the raft ID, and the leader's view of that ID's log belongs to the
// predecessor.
func removeStale(sorted []kv.Member, canRemove bool, stale func(kv.Member) (uint64, bool)) (action, bool) {
	if !canRemove {
		return action{}, false
	}
	for _, wantVoter := range []bool{false, true} {
		for _, m := range sorted {
			if inc, old := stale(m); old && m.Voter == wantVoter {
				return action{kind: actRemove, id: m.ID, reason: fmt.Sprintf("an earlier incarnation (%s): the node now runs incarnation %s",
					formatIncarnation(m.Incarnation), formatIncarnation(inc))}, true
			}
		}
	}
	return action{}, false
}

// staleIncarnation reports whether raft member m is an earlier incarnation
// of the node its name now runs as: the configuration recorded one
// incarnation, and the alive gossip member g of that name (known: present)
// announces another (inc). Members without a recorded or announced
// incarnation are never stale; neither is this node.
func staleIncarnation(self string, m kv.Member, g gossipMember, known bool) (inc uint64, stale bool) {
	if m.ID == self || m.Incarnation == 0 || !known || g.Status != GossipAlive {
		return 0, false
	}
	inc, err := tagIncarnation(g.Tags)
	if err != nil || inc == 0 || inc == m.Incarnation {
		return 0, false
	}
	return inc, true
}

// otherIncarnation reports whether gossip's record g of a member that
// is not alive is about another incarnation than the one the raft
// configuration recorded (rec): a node rebuilt under its name, admitted
// as a new incarnation, can still be held "left" or "failed" under its
// predecessor's tags by a member whose gossip has not yet taken the new
// incarnation's alive message (it carries a lower gossip incarnation
// until it refutes the old state). That record says nothing of the
// member the configuration holds, which is then as good as unknown to
// gossip: it is removed only past the longer grace, never at once as
// having left. Without an incarnation on either side, the record is
// taken as the member's.
func otherIncarnation(g gossipMember, rec uint64) bool {
	if rec == 0 || g.Status == GossipAlive || g.Status == GossipLeaving {
		return false
	}
	inc, err := tagIncarnation(g.Tags)
	return err == nil && inc != 0 && inc != rec
}

func orUnknown(s string) string {
	if s == GossipUnknown {
		return "unknown to gossip"
	}
	return s
}

// commitIndex is the leader's commit index, or the highest voter Match.
func commitIndex(v Voters, raft []kv.Member) uint64 {
	if ci, ok := v.(CommitIndexer); ok {
		return ci.CommitIndex()
	}
	var c uint64
	for _, m := range raft {
		if m.Voter && m.Match > c {
			c = m.Match
		}
	}
	return c
}

// updateFailedSince keeps, for every raft member that is not alive in
// gossip, the time it was first seen so.
func updateFailedSince(self string, now time.Time, gossip []gossipMember, raft []kv.Member, failedSince map[string]time.Time) {
	byName := make(map[string]string, len(gossip))
	for _, g := range gossip {
		byName[g.Name] = g.Status
	}
	inRaft := make(map[string]bool, len(raft))
	for _, m := range raft {
		inRaft[m.ID] = true
		st, known := byName[m.ID]
		down := m.ID != self && (!known || st == GossipFailed || st == GossipLeft)
		if !down {
			delete(failedSince, m.ID)
			continue
		}
		if _, ok := failedSince[m.ID]; !ok {
			failedSince[m.ID] = now
		}
	}
	for id := range failedSince {
		if !inRaft[id] {
			delete(failedSince, id)
		}
	}
}
