package membership

import (
	"fmt"
	"time"

	"github.com/hashicorp/serf/serf"
)

// join joins the cluster through the configured seeds, JoinAttempts times
// JoinRetryInterval apart. A node that no seed answers refuses to start
// (it never starts a second cluster on its own), unless it is a restarted
// member that serf's snapshot already rejoined to a member it knew.
func (a *Agent) join() error {
	var lastErr error
	for attempt := 1; attempt <= a.cfg.JoinAttempts; attempt++ {
		n, err := a.serf.Join(a.cfg.Seeds, true)
		a.mu.Lock()
		dup := a.joinDup
		a.mu.Unlock()
		if dup != nil {
			return dup
		}
		if n > 0 {
			if err != nil {
				a.log.Warn("membership: some seeds did not answer", "joined", n, "err", err)
			}
			return nil
		}
		lastErr = err
		if peer := a.rejoinedPeer(); peer != "" {
			// A restarted member: serf's snapshot rejoined it to a member it
			// knew, so it is in its cluster whatever became of its seeds.
			a.log.Warn("membership: no seed answered; rejoined the cluster through a member this node knew (gossip snapshot)",
				"seeds", a.cfg.Seeds, "via", peer, "err", err)
			return nil
		}
		a.log.Warn("membership: join attempt failed", "attempt", attempt, "of", a.cfg.JoinAttempts, "seeds", a.cfg.Seeds, "err", err)
		if attempt < a.cfg.JoinAttempts {
			select {
			case <-time.After(a.cfg.JoinRetryInterval):
			case <-a.stop:
				return fmt.Errorf("membership: join aborted: %w", lastErr)
			}
		}
	}
	return fmt.Errorf("membership: could not join any seed of %v after %d attempts: %w: check the seeds setting, that a seed is running, and that this node has the cluster's gossip key",
		a.cfg.Seeds, a.cfg.JoinAttempts, lastErr)
}

// rejoinedPeer is an alive member other than this node ("" if none): one
// that serf's snapshot rejoined on a restart. A node that never joined
// has no snapshot and knows no one.
func (a *Agent) rejoinedPeer() string {
	for _, m := range a.serf.Members() {
		if m.Name != a.cfg.NodeID && m.Status == serf.StatusAlive {
			return m.Name
		}
	}
	return ""
}
