package membership

import (
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/kv"
)

// TestDecideIncarnations: a member the configuration holds under one
// incarnation while its name gossips another is an earlier incarnation
// (the node was rebuilt with a new data directory): it is removed before
// the new one is added, never promoted, and does not count as an alive
// voter; a new node is added naming the incarnation it announces.
func TestDecideIncarnations(t *testing.T) {
	now := time.Unix(1000, 0)
	p := policy{self: "a", fingerprint: "fp", compatible: EqualFingerprints, grace: 10 * time.Second, unknownGrace: time.Minute, promoteLag: 5}
	g := func(name string, inc uint64) gossipMember { return incMember(name, inc, GossipAlive) }
	v := incVoter
	l := func(id string, inc uint64) kv.Member {
		return kv.Member{ID: id, RaftAddr: id + ":2", Match: 9, Incarnation: inc}
	}
	cases := []struct {
		name   string
		gossip []gossipMember
		raft   []kv.Member
		want   string
		inc    uint64
		reason string
	}{
		{"new node added with its incarnation", []gossipMember{g("a", 1), g("b", 2)}, []kv.Member{v("a", 1)}, "add-learner b", 2, ""},
		{"node without an incarnation added without one", []gossipMember{g("a", 1), g("b", 0)}, []kv.Member{v("a", 1)}, "add-learner b", 0, ""},
		{"earlier incarnation of a voter removed", []gossipMember{g("a", 1), g("b", 2), g("c", 7)}, []kv.Member{v("a", 1), v("b", 2), v("c", 3)}, "remove c", 0,
			"earlier incarnation (0000000000000003): the node now runs incarnation 0000000000000007"},
		{"earlier incarnation of a learner removed before a voter's", []gossipMember{g("a", 1), g("b", 5), g("c", 7), g("d", 4), g("e", 4)},
			[]kv.Member{v("a", 1), v("b", 2), l("c", 3), v("d", 4), v("e", 4)}, "remove c", 0, "earlier incarnation"},
		{"earlier incarnation of a learner is not promoted (no quorum to remove it)", []gossipMember{g("a", 1), func() gossipMember { m := g("b", 2); m.Status = GossipFailed; return m }(), g("c", 7)},
			[]kv.Member{v("a", 1), v("b", 2), l("c", 3)}, "none", 0, ""},
		{"an earlier incarnation is not an alive voter: no quorum, kept", []gossipMember{g("a", 1), g("b", 9), g("c", 9)}, []kv.Member{v("a", 1), v("b", 2), v("c", 3)}, "none", 0, ""},
		{"same incarnation: nothing to do", []gossipMember{g("a", 1), g("b", 2)}, []kv.Member{v("a", 1), v("b", 2)}, "none", 0, ""},
		{"unrecorded incarnation is not stale", []gossipMember{g("a", 1), g("b", 2)}, []kv.Member{v("a", 1), v("b", 0)}, "none", 0, ""},
		{"unannounced incarnation is not stale", []gossipMember{g("a", 1), g("b", 0)}, []kv.Member{v("a", 1), v("b", 2)}, "none", 0, ""},
		{"this node is never stale", []gossipMember{g("a", 8), g("b", 2)}, []kv.Member{v("a", 1), v("b", 2)}, "none", 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			refused := refusals(p, tc.gossip, tc.raft)
			act, note := decide(p, now, tc.gossip, tc.raft, commitIndexOf(tc.raft), map[string]time.Time{}, refused)
			got := "none"
			if act.kind != actNone {
				got = act.kind.String() + " " + act.id
			}
			if got != tc.want || act.inc != tc.inc || !strings.Contains(act.reason, tc.reason) {
				t.Fatalf("decide = %s (incarnation %x, reason %q, note %q), want %s (incarnation %x, reason with %q)", got, act.inc, act.reason, note, tc.want, tc.inc, tc.reason)
			}
		})
	}
}

func TestMalformedIncarnationTagIsRefused(t *testing.T) {
	p := policy{self: "a", fingerprint: "fp", compatible: EqualFingerprints}
	raft := []kv.Member{{ID: "a", RaftAddr: "a:2", Voter: true}}
	for _, bad := range []string{"", "xyz", "0000000000000000", "1"} {
		gossip := []gossipMember{{Name: "b", Status: GossipAlive, Tags: map[string]string{TagID: "b", TagRaftAddr: "b:2", TagFingerprint: "fp", TagRole: RoleVoter, TagIncarnation: bad}}}
		if got := refusals(p, gossip, raft)["b"]; !strings.Contains(got, `tag "inc"`) {
			t.Errorf("inc tag %q: refusal %q", bad, got)
		}
	}
	c := testConfig("n1", "127.0.98.40")
	c.Incarnation = 0xbeef
	if got := c.tags()[TagIncarnation]; got != "000000000000beef" {
		t.Fatalf("inc tag %q", got)
	}
	c.Incarnation = 0
	if _, ok := c.tags()[TagIncarnation]; ok {
		t.Fatal("an unknown incarnation is announced")
	}
}

// TestDecideStaleLeaveOfAnEarlierIncarnation: a node rebuilt under its
// name and admitted as a new incarnation can still be held "left" (or
// "failed") under its predecessor's tags by a leader whose gossip has
// not taken the new incarnation's alive message. That leave is not the
// member's: it is not removed as having left; it is removed only as a
// member unknown to gossip, past the longer grace. A leave under the
// incarnation the configuration recorded (or with no incarnation on
// either side) still removes it after the left grace.
func TestDecideStaleLeaveOfAnEarlierIncarnation(t *testing.T) {
	now := time.Unix(1000, 0)
	p := policy{self: "a", fingerprint: "fp", compatible: EqualFingerprints, grace: 10 * time.Second, unknownGrace: time.Minute, leftGrace: 2 * time.Second, promoteLag: 5}
	g, v := incMember, incVoter
	since := func(d time.Duration) map[string]time.Time { return map[string]time.Time{"c": now.Add(-d)} }
	cases := []struct {
		name   string
		c      gossipMember
		rec    uint64
		since  map[string]time.Time
		want   string
		reason string
		note   string
	}{
		{"stale leave past the left grace: kept", g("c", 3, GossipLeft), 7, since(3 * time.Second), "none", "", "c is unknown to gossip, removal in 57s"},
		{"stale failure past the failed grace: kept", g("c", 3, GossipFailed), 7, since(11 * time.Second), "none", "", "c is unknown to gossip, removal in 49s"},
		{"stale leave past the unknown grace: removed as unknown", g("c", 3, GossipLeft), 7, since(61 * time.Second), "remove c", "unknown to gossip", ""},
		{"own leave past the left grace: removed", g("c", 7, GossipLeft), 7, since(3 * time.Second), "remove c", "left the cluster", ""},
		{"own leave within the left grace: kept", g("c", 7, GossipLeft), 7, since(time.Second), "none", "", "c is reported left"},
		{"leave with no recorded incarnation: removed", g("c", 3, GossipLeft), 0, since(3 * time.Second), "remove c", "left the cluster", ""},
		{"leave with no announced incarnation: removed", g("c", 0, GossipLeft), 7, since(3 * time.Second), "remove c", "left the cluster", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gossip := []gossipMember{g("a", 1, GossipAlive), g("b", 2, GossipAlive), tc.c}
			raft := []kv.Member{v("a", 1), v("b", 2), v("c", tc.rec)}
			act, note := decide(p, now, gossip, raft, commitIndexOf(raft), tc.since, refusals(p, gossip, raft))
			got := "none"
			if act.kind != actNone {
				got = act.kind.String() + " " + act.id
			}
			if got != tc.want || !strings.Contains(act.reason, tc.reason) || !strings.Contains(note, tc.note) {
				t.Fatalf("decide = %s (reason %q, note %q), want %s (reason with %q, note with %q)", got, act.reason, note, tc.want, tc.reason, tc.note)
			}
		})
	}
}

// incMember is a writ node's gossip record announcing incarnation inc (0:
// none) with status; incVoter a voter recorded under incarnation inc.
func incMember(name string, inc uint64, status string) gossipMember {
	tags := map[string]string{TagID: name, TagRaftAddr: name + ":2", TagFingerprint: "fp", TagRole: RoleVoter}
	if inc != 0 {
		tags[TagIncarnation] = formatIncarnation(inc)
	}
	return gossipMember{Name: name, Addr: name + ":1", Status: status, Tags: tags}
}

func incVoter(id string, inc uint64) kv.Member {
	return kv.Member{ID: id, RaftAddr: id + ":2", Voter: true, Match: 9, Incarnation: inc}
}
