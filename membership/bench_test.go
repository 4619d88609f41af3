package membership

import (
	"fmt"
	"testing"
	"time"

	"github.com/writ-dev/writ/kv"
)

// BenchmarkReconcileDecision measures one reconcile decision (refusals and
// the next change) for a 7-member cluster with one failed voter.
func BenchmarkReconcileDecision(b *testing.B) {
	p := policy{self: "n0", fingerprint: "fp", compatible: EqualFingerprints, grace: time.Minute, promoteLag: 16, maxVoters: 5}
	var gossip []gossipMember
	var raft []kv.Member
	for i := 0; i < 7; i++ {
		id := fmt.Sprintf("n%d", i)
		st := GossipAlive
		if i == 3 {
			st = GossipFailed
		}
		gossip = append(gossip, gossipMember{Name: id, Addr: id + ":1", Status: st,
			Tags: map[string]string{TagID: id, TagRaftAddr: id + ":2", TagFingerprint: "fp", TagRole: RoleVoter}})
		raft = append(raft, kv.Member{ID: id, RaftAddr: id + ":2", Voter: i < 5, Match: 100})
	}
	now := time.Now()
	failed := map[string]time.Time{"n3": now}
	b.ReportAllocs()
	for b.Loop() {
		ref := refusals(p, gossip, raft)
		decide(p, now, gossip, raft, 100, failed, ref)
	}
}

func BenchmarkEncodedTagSize(b *testing.B) {
	base := testConfig("n1", "127.0.2.1")
	cfg := base.withDefaults()
	tags := cfg.tags()
	b.ReportAllocs()
	for b.Loop() {
		EncodedTagSize(tags)
	}
}
