package membership

import (
	"sort"

	"github.com/writ-dev/writ/kv"
)

// refusedSchemaPrefix starts every refusal for a schema the cluster cannot
// run beside its own.
const refusedSchemaPrefix = "incompatible schema: "

// Candidate is a node whose schema the reconciler judges: a new alive node
// outside the raft configuration, or a member (Member) announcing a schema
// other than the ones the rest of the configuration runs — a node
// restarted in place with another schema.
type Candidate struct {
	ID          string
	Fingerprint string
	APIAddr     string
	Member      bool
}

// Peer is a member of the raft configuration (other than the candidate)
// with the schema fingerprint and API address gossip announces for it;
// both are empty for a member gossip does not know.
type Peer struct {
	ID          string
	Fingerprint string
	APIAddr     string
}

// AdmitFunc decides whether a candidate's schema may run beside the
// schemas of the rest of the configuration; the error says why not (it is
// shown by View and `writctl members` and logged once). It is called on
// every reconcile, so it must be cheap for a candidate it has judged before.
type AdmitFunc func(c Candidate, peers []Peer) error

// judge applies Admit (or Compatible against this node's fingerprint) to
// one gossip member; members already refused are not its peers.
func (p policy) judge(g gossipMember, raft []kv.Member, member bool, refused map[string]string) error {
	if p.admit == nil {
		return p.compatible(p.fingerprint, g.Tags[TagFingerprint])
	}
	return p.admit(Candidate{ID: g.Name, Fingerprint: g.Tags[TagFingerprint], APIAddr: g.Tags[TagAPIAddr], Member: member}, peersOf(g.Name, p.gossipByName, raft, refused))
}

func peersOf(except string, byName map[string]gossipMember, raft []kv.Member, refused map[string]string) []Peer {
	out := make([]Peer, 0, len(raft))
	for _, m := range raft {
		if _, bad := refused[m.ID]; bad || m.ID == except {
			continue
		}
		g := byName[m.ID]
		out = append(out, Peer{ID: m.ID, Fingerprint: g.Tags[TagFingerprint], APIAddr: g.Tags[TagAPIAddr]})
	}
	return out
}

// refuseMembers judges the alive members of the configuration that
// announce a fingerprint some other member does not: with Admit set, a
// member restarted with a schema the rest cannot run beside theirs is
// refused (listed, logged and not promoted). Members are judged in ID
// order, each against the members not refused before it. Without Admit
// members are not judged.
func refuseMembers(p policy, gossip []gossipMember, raft []kv.Member, out map[string]string) {
	if p.admit == nil {
		return
	}
	inRaft := make(map[string]bool, len(raft))
	for _, m := range raft {
		inRaft[m.ID] = true
	}
	sorted := append([]gossipMember(nil), gossip...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, g := range sorted {
		if g.Status != GossipAlive || !inRaft[g.Name] || g.Name == p.self {
			continue
		}
		same := true
		for _, m := range raft {
			if o, ok := p.gossipByName[m.ID]; ok && o.Tags[TagFingerprint] != g.Tags[TagFingerprint] {
				same = false
				break
			}
		}
		if same {
			continue
		}
		if err := p.judge(g, raft, true, out); err != nil {
			out[g.Name] = refusedSchemaPrefix + err.Error()
		}
	}
}
