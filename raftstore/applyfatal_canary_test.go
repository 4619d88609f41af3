//go:build canary_applyoverrun

package raftstore

import (
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/kv"
)

// TestApplyPanicIsAFatalApplyStop runs only in the canary build, whose
// apply arena overruns on a 3,000-byte value: the real panic in apply is
// recovered into an ApplyError that names the entry and the command, the
// node stops instead of crashing the process, and the restart stops at
// the same entry again.
func TestApplyPanicIsAFatalApplyStop(t *testing.T) {
	c := newCluster(t, 1, nil)
	n := c.nodes[c.leader(10*time.Second)]
	res := mustPropose(t, n, put("small", "k", "v"))
	proposeRawCmd := put("big", "big", strings.Repeat("x", 3000))
	if _, err := n.Propose(t.Context(), []kv.Command{proposeRawCmd}); err != nil {
		t.Fatal(err)
	}
	ae := waitApplyError(t, n)
	if !ae.Panic || ae.Index != res[0].Index+1 || ae.CommandID != "big" || ae.Commands != 1 || !strings.Contains(ae.Error(), "slice bounds out of range") {
		t.Fatalf("apply error %+v", ae)
	}
	n = c.start(0)
	if again := waitApplyError(t, n); again.Index != ae.Index || again.CommandID != "big" {
		t.Fatalf("restart stopped at %+v, first stop at %d", again, ae.Index)
	}
}
