package membership

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/kv"
)

// TestAdmit_FakeSchemas: with Config.Admit the reconciler judges a new
// node against the rest of the configuration (not just its own
// fingerprint), and a member restarted with another schema is judged too:
// refused, it is listed and not promoted; admitted, nothing changes.
// The schema rule itself is a fake here (fingerprints "v1", "v2", "v3";
// "v3" is BLOCKED); real schemas are judged in cmd/writd's rolling tests.
func TestAdmit_FakeSchemas(t *testing.T) {
	var calls []Candidate
	admit := func(c Candidate, peers []Peer) error {
		calls = append(calls, c)
		for _, p := range peers {
			if p.ID == c.ID {
				t.Errorf("candidate %s passed as its own peer", c.ID)
			}
		}
		// like compat.Effective: a peer on v3 narrows what the others
		// are taken to run, so v3 would pass beside it
		if c.Fingerprint == "v3" && !slices.ContainsFunc(peers, func(p Peer) bool { return p.Fingerprint == "v3" }) {
			return errors.New("BLOCKED WRIT_COMPAT_TYPE_REMOVED: gone (fix: keep it)")
		}
		return nil
	}
	p := policy{self: "a", fingerprint: "v1", compatible: EqualFingerprints, admit: admit, grace: time.Minute, unknownGrace: time.Minute, promoteLag: 5}
	g := func(name, fp string) gossipMember {
		return gossipMember{Name: name, Addr: name + ":1", Status: GossipAlive,
			Tags: map[string]string{TagID: name, TagRaftAddr: name + ":2", TagAPIAddr: name + ":3", TagFingerprint: fp, TagRole: RoleVoter}}
	}
	v := func(id string) kv.Member { return kv.Member{ID: id, RaftAddr: id + ":2", Voter: true, Match: 10} }
	l := func(id string) kv.Member { return kv.Member{ID: id, RaftAddr: id + ":2", Match: 10} }

	// a new v2 node is admitted although its fingerprint differs
	gossip := []gossipMember{g("a", "v1"), g("b", "v1"), g("c", "v2")}
	raft := []kv.Member{v("a"), v("b")}
	ref := refusals(p, gossip, raft)
	if len(ref) != 0 {
		t.Fatalf("v2 newcomer refused: %v", ref)
	}
	if act, _ := decide(p, time.Now(), gossip, raft, 10, nil, ref); act.kind != actAddLearner || act.id != "c" {
		t.Fatalf("v2 newcomer: %v, want add-learner c", act)
	}
	if len(calls) != 1 || calls[0].ID != "c" || calls[0].Member || calls[0].APIAddr != "c:3" {
		t.Fatalf("admit calls %+v", calls)
	}

	// a new v3 node is refused with the reason
	gossip = []gossipMember{g("a", "v1"), g("b", "v1"), g("c", "v3")}
	ref = refusals(p, gossip, raft)
	if !strings.HasPrefix(ref["c"], refusedSchemaPrefix) || !strings.Contains(ref["c"], "WRIT_COMPAT_TYPE_REMOVED") {
		t.Fatalf("v3 newcomer: %v", ref)
	}

	// members on one schema are not judged at all
	calls = nil
	gossip = []gossipMember{g("a", "v1"), g("b", "v1")}
	if ref = refusals(p, gossip, raft); len(ref) != 0 || len(calls) != 0 {
		t.Fatalf("uniform members: refused %v, judged %+v", ref, calls)
	}

	// a learner restarted in place on v3 is refused and not promoted; on
	// v2 it is judged, admitted and promoted
	raft = []kv.Member{v("a"), v("b"), l("c")}
	gossip = []gossipMember{g("a", "v1"), g("b", "v1"), g("c", "v3")}
	ref = refusals(p, gossip, raft)
	if !strings.Contains(ref["c"], "WRIT_COMPAT_TYPE_REMOVED") {
		t.Fatalf("member restarted on v3: %v", ref)
	}
	if act, _ := decide(p, time.Now(), gossip, raft, 10, nil, ref); act.kind == actPromote {
		t.Fatalf("refused learner promoted: %v", act)
	}
	// a refused member is not a peer of the others: a newcomer on v3 is
	// not admitted because the refused member runs v3 too
	gossip = append(gossip, g("d", "v3"))
	ref = refusals(p, gossip, raft)
	if !strings.Contains(ref["d"], "WRIT_COMPAT_TYPE_REMOVED") {
		t.Fatalf("v3 newcomer beside a refused v3 member: %v", ref)
	}
	calls = nil
	gossip = []gossipMember{g("a", "v1"), g("b", "v1"), g("c", "v2")}
	ref = refusals(p, gossip, raft)
	judgedC := false
	for _, c := range calls {
		judgedC = judgedC || c.ID == "c" && c.Member
	}
	// every member whose schema some other member does not share is judged
	// (b too, against a and c)
	if len(ref) != 0 || !judgedC {
		t.Fatalf("member restarted on v2: refused %v, judged %+v", ref, calls)
	}
	if act, _ := decide(p, time.Now(), gossip, raft, 10, nil, ref); act.kind != actPromote || act.id != "c" {
		t.Fatalf("member restarted on v2: %v, want promote c", act)
	}

	// without Admit, a differing newcomer is refused by Compatible and
	// members are not judged (the previous behaviour)
	p.admit = nil
	raft = []kv.Member{v("a"), v("b")}
	if ref = refusals(p, gossip, raft); !strings.Contains(ref["c"], "differs") {
		t.Fatalf("without Admit: %v", ref)
	}
}
