package membership

import (
	"fmt"
	"os"
	"sort"
	"strings"
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
	if peer := a.awaitRejoin(); peer != "" {
		a.log.Warn("membership: no seed answered; rejoined the cluster through a member this node knew (gossip snapshot)",
			"seeds", a.cfg.Seeds, "via", peer, "err", lastErr)
		return nil
	}
	return fmt.Errorf("membership: could not join any seed of %v after %d attempts: %w: check the seeds setting, that a seed is running, and that this node has the cluster's gossip key",
		a.cfg.Seeds, a.cfg.JoinAttempts, lastErr)
}

// rejoinGrace bounds how long a restarted member whose seeds are all down
// waits for serf's own rejoin of the members its snapshot names.
const rejoinGrace = 5 * time.Second

// awaitRejoin waits, for a restarted member, until serf's rejoin through
// its snapshot reached an alive member, and returns that member ("" if
// none did within rejoinGrace, or this node never joined). serf rejoins
// on its own goroutine; on a loaded machine it can finish after every seed
// attempt failed, and the member would then refuse to start though it is
// back in its cluster.
func (a *Agent) awaitRejoin() string {
	if len(a.snapshotPeers) == 0 {
		return ""
	}
	a.log.Info("membership: no seed answered; waiting for the gossip snapshot's rejoin", "known", a.snapshotPeers, "up_to", rejoinGrace)
	deadline := time.Now().Add(rejoinGrace)
	for {
		if peer := a.rejoinedPeer(); peer != "" {
			return peer
		}
		if time.Now().After(deadline) {
			return ""
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-a.stop:
			return ""
		}
	}
}

// snapshotPeers are the members other than self that serf's snapshot at
// path will try to rejoin: those last seen alive, unless the node left
// (serf does not rejoin after a leave).
func snapshotPeers(path, self string) []string {
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	alive := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "alive: "):
			if f := strings.Fields(strings.TrimPrefix(line, "alive: ")); len(f) > 0 && f[0] != self {
				alive[f[0]] = true
			}
		case strings.HasPrefix(line, "not-alive: "):
			delete(alive, strings.TrimSpace(strings.TrimPrefix(line, "not-alive: ")))
		case line == "leave":
			clear(alive)
		}
	}
	out := make([]string, 0, len(alive))
	for n := range alive {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
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
