package raftstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/writ-dev/writ/internal/proctest"
	"github.com/writ-dev/writ/kv"
)

// TestRestartedLeaderWithStaleForwardedProposals: followers keep
// forwarding proposals to a leader that just died; their transport queues
// them. When the old leader restarts on the same address it has no leader,
// and the queued proposals are the first thing the new leader's stream
// delivers to it. Stepping a proposal into raft blocks while there is no
// leader, so the receiving side must not step proposals inline: otherwise
// the stream stalls and the restarted node never hears the heartbeats
// queued behind them (it stays leaderless indefinitely).
func TestRestartedLeaderWithStaleForwardedProposals(t *testing.T) {
	c := newCluster(t, 3, nil)
	li := c.leader(10 * time.Second)
	mustPropose(t, c.nodes[li], put("a", "k/a", "v"))
	c.stop(li)
	// Until they notice (an election timeout), both followers forward
	// proposals to the dead leader.
	end := time.Now().Add(400 * time.Millisecond)
	for i := 0; time.Now().Before(end); i++ {
		for j := range 3 {
			if j == li {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			_, _ = c.nodes[j].Propose(ctx, []kv.Command{put(fmt.Sprintf("stale-%d-%d", j, i), "k/stale", "v")})
			cancel()
		}
		time.Sleep(5 * time.Millisecond)
	}
	nl := c.leader(10 * time.Second)
	mustPropose(t, c.nodes[nl], put("b", "k/b", "v"))
	start := time.Now()
	n := c.start(li)
	proctest.WaitFor(t, 5*time.Second, "restarted old leader learns the new leader", func() bool {
		return n.Status().LeaderID != ""
	})
	t.Logf("restarted node learned the leader after %v", time.Since(start))
	c.converge(20 * time.Second)
}
