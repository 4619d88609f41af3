package membership

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/writ-dev/writ/internal/proctest"
	"github.com/writ-dev/writ/kv"
)

// verifyingVoters adds a PeerVerifier to a fake node: ids in refuse fail
// the peer check.
type verifyingVoters struct {
	Voters
	mu     sync.Mutex
	refuse map[string]bool
	probed map[string]int
}

func (v *verifyingVoters) VerifyPeer(_ context.Context, id, raftAddr string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.probed[id]++
	if raftAddr == "" {
		return errors.New("no raft address")
	}
	if v.refuse[id] {
		return errors.New("tls: first record does not look like a TLS handshake")
	}
	return nil
}

func (v *verifyingVoters) set(id string, refuse bool) {
	v.mu.Lock()
	v.refuse[id] = refuse
	v.mu.Unlock()
}

// TestAgent_FakeVoters_UnverifiedPeerIsRefusedNeverALearner: a node with
// the gossip key whose peer credentials fail the leader's check is listed
// refused with the reason and never added; once it verifies, it is.
func TestAgent_FakeVoters_UnverifiedPeerIsRefusedNeverALearner(t *testing.T) {
	f := newFakeRaft("n1", "127.0.42.20:9000")
	defer f.close()
	v1 := &verifyingVoters{Voters: f.node("n1"), refuse: map[string]bool{"n2": true}, probed: map[string]int{}}
	sink := &logSink{}
	c1 := testConfig("n1", "127.0.42.20")
	c1.Logger = sink.logger()
	n1 := startAgent(t, c1, v1)
	startAgent(t, testConfig("n2", "127.0.42.21", n1.Addr()), f.node("n2"))

	proctest.WaitFor(t, 10*time.Second, "n2 refused on n1", func() bool {
		for _, r := range n1.Refused() {
			if r.ID == "n2" && strings.Contains(r.Reason, "peer credentials not verified") && strings.Contains(r.Reason, "TLS handshake") {
				return true
			}
		}
		return false
	})
	if v, l := f.snapshot(); join(v) != "n1" || len(l) != 0 {
		t.Fatalf("configuration %v/%v: an unverified n2 must not be admitted", v, l)
	}
	if !strings.Contains(sink.String(), "node refused") {
		t.Fatalf("log does not show the refusal:\n%s", sink.String())
	}
	v1.set("n2", false)
	proctest.WaitFor(t, 15*time.Second, "n2 admitted once verified", func() bool {
		v, _ := f.snapshot()
		return join(v) == "n1,n2" && len(n1.Refused()) == 0
	})
}

// TestAgent_FakeVoters_UnverifiedLearnerIsNeverPromoted: a learner whose
// peer credentials stop verifying (its certificate expired or was
// replaced) stays a learner: the leader checks again before promoting.
func TestAgent_FakeVoters_UnverifiedLearnerIsNeverPromoted(t *testing.T) {
	f := newFakeRaft("n1", "127.0.42.22:9000")
	defer f.close()
	f.mu.Lock()
	f.members["n2"] = &kv.Member{ID: "n2", RaftAddr: "127.0.42.23:9000"}
	f.mu.Unlock()
	v1 := &verifyingVoters{Voters: f.node("n1"), refuse: map[string]bool{"n2": true}, probed: map[string]int{}}
	n1 := startAgent(t, testConfig("n1", "127.0.42.22"), v1)
	startAgent(t, testConfig("n2", "127.0.42.23", n1.Addr()), f.node("n2"))
	// Each promotion attempt probes n2; after three, it is still a learner.
	proctest.WaitFor(t, 15*time.Second, "three promotion attempts", func() bool {
		v1.mu.Lock()
		defer v1.mu.Unlock()
		return v1.probed["n2"] >= 3
	})
	if v, l := f.snapshot(); join(v) != "n1" || join(l) != "n2" {
		t.Fatalf("configuration %v/%v: an unverified learner was promoted", v, l)
	}
	if e := n1.View().LastError; !strings.Contains(e, "TLS handshake") {
		t.Fatalf("last error %q does not say why n2 is not promoted", e)
	}
	v1.set("n2", false)
	proctest.WaitFor(t, 15*time.Second, "n2 promoted once verified", func() bool {
		v, _ := f.snapshot()
		return join(v) == "n1,n2"
	})
}
