//go:build soak

package raftstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/writ-dev/writ/internal/proctest"
	"github.com/writ-dev/writ/kv"
)

// TestSoakRollingRestartsUnderLoad restarts random nodes of a 3-node
// cluster (small snapshot interval) while 8 proposers write through every
// node, then checks that every acknowledged write is on every node and the
// state hashes are equal. Run with -tags soak.
func TestSoakRollingRestartsUnderLoad(t *testing.T) {
	c := newCluster(t, 3, func(_ int, cfg *Config) {
		cfg.SnapshotCount = 200
		cfg.SnapshotCatchUp = 50
	})
	c.leader(10 * time.Second)
	var mu sync.Mutex
	var nodesMu sync.RWMutex
	var acked []string
	load := proctest.StartLoad(8, func(w, i int) {
		nodesMu.RLock()
		n := c.nodes[(w+i)%3]
		nodesMu.RUnlock()
		key := fmt.Sprintf("soak/%d/%d", w, i)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		p, err := n.Propose(ctx, []kv.Command{put(key, key, "v")})
		if err == nil {
			res, werr := p.Wait(ctx)
			if werr == nil && res[0].Status == kv.StatusApplied {
				mu.Lock()
				acked = append(acked, key)
				mu.Unlock()
			}
		} else {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	})
	for round := range 20 {
		time.Sleep(1500 * time.Millisecond)
		i := rand.IntN(3)
		nodesMu.Lock()
		c.stop(i)
		nodesMu.Unlock()
		time.Sleep(500 * time.Millisecond)
		nodesMu.Lock()
		c.start(i)
		nodesMu.Unlock()
		mu.Lock()
		t.Logf("round %d: restarted n%d, %d acknowledged", round, i+1, len(acked))
		mu.Unlock()
	}
	load.Stop()
	c.leader(10 * time.Second)
	c.converge(30 * time.Second)
	for _, n := range c.nodes {
		recs, _ := n.List(context.Background(), "soak/", false)
		have := map[string]bool{}
		for _, r := range recs {
			have[r.Key] = true
		}
		for _, k := range acked {
			if !have[k] {
				t.Fatalf("%s lost acknowledged %s", n.ID(), k)
			}
		}
	}
	t.Logf("%d acknowledged writes verified on 3 nodes", len(acked))
}
