package membership

import (
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/kv"
)

func TestDecide(t *testing.T) {
	now := time.Unix(1000, 0)
	p := policy{self: "a", fingerprint: "fp", compatible: EqualFingerprints, grace: 10 * time.Second, unknownGrace: 2 * time.Minute, promoteLag: 5}
	g := func(name, status string) gossipMember {
		return gossipMember{Name: name, Addr: name + ":1", Status: status,
			Tags: map[string]string{TagID: name, TagRaftAddr: name + ":2", TagFingerprint: "fp", TagRole: RoleVoter}}
	}
	v := func(id string, match uint64) kv.Member {
		return kv.Member{ID: id, RaftAddr: id + ":2", Voter: true, Match: match}
	}
	l := func(id string, match uint64) kv.Member { return kv.Member{ID: id, RaftAddr: id + ":2", Match: match} }
	long := map[string]time.Time{"b": now.Add(-time.Minute), "c": now.Add(-time.Minute)}
	short := map[string]time.Time{"c": now.Add(-time.Second)}
	pl := p
	pl.leftGrace = 2 * time.Second

	cases := []struct {
		name        string
		p           policy
		gossip      []gossipMember
		raft        []kv.Member
		failedSince map[string]time.Time
		want        string // "kind id" or "none"
		note        string
	}{
		{"new node becomes learner", p, []gossipMember{g("a", GossipAlive), g("b", GossipAlive)}, []kv.Member{v("a", 10)}, nil, "add-learner b", ""},
		{"caught-up learner promoted", p, []gossipMember{g("a", GossipAlive), g("b", GossipAlive)}, []kv.Member{v("a", 10), l("b", 6)}, nil, "promote b", ""},
		{"manual promotion: caught-up learner waits for an operator", policy{self: "a", fingerprint: "fp", compatible: EqualFingerprints, grace: time.Second, promoteLag: 5, manualPromote: true},
			[]gossipMember{g("a", GossipAlive), g("b", GossipAlive)}, []kv.Member{v("a", 10), l("b", 10)}, nil, "none", "writctl members promote b"},
		{"lagging learner waits", p, []gossipMember{g("a", GossipAlive), g("b", GossipAlive)}, []kv.Member{v("a", 10), l("b", 4)}, nil, "none", "learner b at 4"},
		{"learner with no match waits", p, []gossipMember{g("a", GossipAlive), g("b", GossipAlive)}, []kv.Member{v("a", 0), l("b", 0)}, nil, "none", "learner b"},
		{"max voters keeps learner", policy{self: "a", fingerprint: "fp", compatible: EqualFingerprints, grace: time.Second, promoteLag: 5, maxVoters: 1},
			[]gossipMember{g("a", GossipAlive), g("b", GossipAlive)}, []kv.Member{v("a", 10), l("b", 10)}, nil, "none", ""},
		{"left voter within the left grace kept (a stale leave may be refuted)", pl, []gossipMember{g("a", GossipAlive), g("b", GossipAlive), g("c", GossipLeft)}, []kv.Member{v("a", 9), v("b", 9), v("c", 3)},
			short, "none", "c is reported left; it is removed in 1s"},
		{"left voter past the left grace removed", pl, []gossipMember{g("a", GossipAlive), g("b", GossipAlive), g("c", GossipLeft)}, []kv.Member{v("a", 9), v("b", 9), v("c", 3)},
			map[string]time.Time{"c": now.Add(-3 * time.Second)}, "remove c", ""},
		{"left voter alive again is kept", pl, []gossipMember{g("a", GossipAlive), g("b", GossipAlive), g("c", GossipAlive)}, []kv.Member{v("a", 9), v("b", 9), v("c", 3)},
			nil, "none", ""},
		{"left voter removed", p, []gossipMember{g("a", GossipAlive), g("b", GossipAlive), g("c", GossipLeft)}, []kv.Member{v("a", 9), v("b", 9), v("c", 3)}, map[string]time.Time{"c": now}, "remove c", ""},
		{"failed voter within grace kept", p, []gossipMember{g("a", GossipAlive), g("b", GossipAlive), g("c", GossipFailed)}, []kv.Member{v("a", 9), v("b", 9), v("c", 3)}, short, "none", "removal in 9s"},
		{"failed voter past grace removed", p, []gossipMember{g("a", GossipAlive), g("b", GossipAlive), g("c", GossipFailed)}, []kv.Member{v("a", 9), v("b", 9), v("c", 3)}, long, "remove c", ""},
		{"voter unknown to gossip waits for the longer grace", p, []gossipMember{g("a", GossipAlive), g("b", GossipAlive)}, []kv.Member{v("a", 9), v("b", 9), v("c", 3)}, long, "none", "c is unknown to gossip, removal in 1m0s"},
		{"voter unknown to gossip past the longer grace removed", p, []gossipMember{g("a", GossipAlive), g("b", GossipAlive)}, []kv.Member{v("a", 9), v("b", 9), v("c", 3)},
			map[string]time.Time{"c": now.Add(-3 * time.Minute)}, "remove c", ""},
		{"two failed within grace: neither removed", p, []gossipMember{g("a", GossipAlive), g("b", GossipFailed), g("c", GossipFailed), g("d", GossipAlive), g("e", GossipAlive)},
			[]kv.Member{v("a", 9), v("b", 3), v("c", 3), v("d", 9), v("e", 9)}, map[string]time.Time{"b": now.Add(-time.Second), "c": now.Add(-2 * time.Second)}, "none", "removal in"},
		{"2 voters, 1 failed: no majority, kept", p, []gossipMember{g("a", GossipAlive), g("b", GossipFailed)}, []kv.Member{v("a", 9), v("b", 3)}, long, "none", "only 1 of 2 voters"},
		{"3 voters, 2 failed: kept", p, []gossipMember{g("a", GossipAlive), g("b", GossipFailed), g("c", GossipFailed)}, []kv.Member{v("a", 9), v("b", 3), v("c", 3)}, long, "none", "only 1 of 3"},
		{"no majority: left voter kept", p, []gossipMember{g("a", GossipAlive), g("b", GossipLeft)}, []kv.Member{v("a", 9), v("b", 3)}, nil, "none", "a removal needs 2"},
		{"no majority: a new node is still admitted", p, []gossipMember{g("a", GossipAlive), g("b", GossipFailed), g("c", GossipFailed), g("d", GossipAlive)},
			[]kv.Member{v("a", 9), v("b", 3), v("c", 3)}, long, "add-learner d", ""},
		{"5 voters, 2 failed: one removed", p, []gossipMember{g("a", GossipAlive), g("b", GossipFailed), g("c", GossipFailed), g("d", GossipAlive), g("e", GossipAlive)},
			[]kv.Member{v("a", 9), v("b", 3), v("c", 3), v("d", 9), v("e", 9)}, long, "remove b", ""},
		{"failed learner before failed voter", p, []gossipMember{g("a", GossipAlive), g("b", GossipFailed), g("c", GossipFailed), g("d", GossipAlive), g("e", GossipAlive)},
			[]kv.Member{v("a", 9), v("b", 3), l("c", 3), v("d", 9), v("e", 9)}, long, "remove c", ""},
		{"never removes self", p, []gossipMember{g("a", GossipLeft), g("b", GossipAlive), g("c", GossipAlive)}, []kv.Member{v("a", 9), v("b", 9), v("c", 9)}, nil, "none", ""},
		{"incompatible node not admitted", p, []gossipMember{g("a", GossipAlive), func() gossipMember { m := g("b", GossipAlive); m.Tags[TagFingerprint] = "other"; return m }()},
			[]kv.Member{v("a", 9)}, nil, "none", ""},
		{"learner role never promoted", p, []gossipMember{g("a", GossipAlive), func() gossipMember { m := g("b", GossipAlive); m.Tags[TagRole] = RoleLearner; return m }()},
			[]kv.Member{v("a", 9), l("b", 9)}, nil, "none", ""},
		{"leaving node not promoted", p, []gossipMember{g("a", GossipAlive), g("b", GossipLeaving)}, []kv.Member{v("a", 9), l("b", 9)}, nil, "none", ""},
		{"failed node not admitted", p, []gossipMember{g("a", GossipAlive), g("b", GossipFailed)}, []kv.Member{v("a", 9)}, nil, "none", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := tc.failedSince
			if fs == nil {
				fs = map[string]time.Time{}
			}
			refused := refusals(tc.p, tc.gossip, tc.raft)
			act, note := decide(tc.p, now, tc.gossip, tc.raft, commitIndexOf(tc.raft), fs, refused)
			got := "none"
			if act.kind != actNone {
				got = act.kind.String() + " " + act.id
			}
			if got != tc.want {
				t.Fatalf("decide = %s (%s), want %s", got, note, tc.want)
			}
			if tc.note != "" && !strings.Contains(note, tc.note) {
				t.Fatalf("note %q lacks %q", note, tc.note)
			}
		})
	}
}

func commitIndexOf(raft []kv.Member) uint64 {
	var c uint64
	for _, m := range raft {
		if m.Voter && m.Match > c {
			c = m.Match
		}
	}
	return c
}

func TestRefusals(t *testing.T) {
	p := policy{self: "a", fingerprint: "fp", compatible: EqualFingerprints}
	mk := func(name string, tags map[string]string) gossipMember {
		return gossipMember{Name: name, Status: GossipAlive, Tags: tags}
	}
	raft := []kv.Member{{ID: "a", RaftAddr: "a:2", Voter: true}}
	gossip := []gossipMember{
		mk("a", map[string]string{TagID: "a", TagRaftAddr: "a:2", TagFingerprint: "fp", TagRole: RoleVoter}),
		mk("ok", map[string]string{TagID: "ok", TagRaftAddr: "ok:2", TagFingerprint: "fp", TagRole: RoleVoter}),
		mk("idmismatch", map[string]string{TagID: "other", TagRaftAddr: "x:2", TagFingerprint: "fp", TagRole: RoleVoter}),
		mk("noraft", map[string]string{TagID: "noraft", TagFingerprint: "fp", TagRole: RoleVoter}),
		mk("dupraft", map[string]string{TagID: "dupraft", TagRaftAddr: "a:2", TagFingerprint: "fp", TagRole: RoleVoter}),
		mk("badrole", map[string]string{TagID: "badrole", TagRaftAddr: "r:2", TagFingerprint: "fp", TagRole: "king"}),
		mk("fp", map[string]string{TagID: "fp", TagRaftAddr: "f:2", TagFingerprint: "zz", TagRole: RoleVoter}),
	}
	got := refusals(p, gossip, raft)
	want := map[string]string{
		"idmismatch": "gossip name",
		"noraft":     "raft address",
		"dupraft":    "already used by member a",
		"badrole":    "role \"king\"",
		"fp":         "incompatible schema",
	}
	if len(got) != len(want) {
		t.Fatalf("refusals %v, want keys of %v", got, want)
	}
	for id, sub := range want {
		if !strings.Contains(got[id], sub) {
			t.Errorf("%s: reason %q lacks %q", id, got[id], sub)
		}
	}
}

func TestUpdateFailedSince(t *testing.T) {
	t0 := time.Unix(100, 0)
	fs := map[string]time.Time{"gone": t0}
	raft := []kv.Member{{ID: "a"}, {ID: "b"}, {ID: "c"}, {ID: "d"}}
	gossip := []gossipMember{{Name: "a", Status: GossipAlive}, {Name: "b", Status: GossipFailed}, {Name: "c", Status: GossipAlive}}
	updateFailedSince("a", t0, gossip, raft, fs)
	if _, ok := fs["gone"]; ok {
		t.Error("non-member kept")
	}
	if fs["b"] != t0 || fs["d"] != t0 || len(fs) != 2 {
		t.Fatalf("failedSince %v, want b and d at t0", fs)
	}
	// Later observations keep the first time; recovery clears it.
	gossip[1].Status = GossipAlive
	updateFailedSince("a", t0.Add(time.Minute), gossip, raft, fs)
	if _, ok := fs["b"]; ok || fs["d"] != t0 {
		t.Fatalf("failedSince %v", fs)
	}
}
