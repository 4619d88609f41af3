package node

import (
	"context"
	"sync"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/metrics"
)

// uiStatus is what the built-in dashboard polls: this node's status and
// every member's own (asked over its API, as `writctl status` does),
// joined with the gossip and consensus view of `writctl members`.
func (n *Node) uiStatus(ctx context.Context) metrics.UIStatus {
	in := &info{n: n}
	self := in.Status(api.WithoutStateHash(ctx))
	out := metrics.UIStatus{
		Node: n.cfg.NodeID, Version: self.Version, Fingerprint: self.Fingerprint, Leader: self.Log.LeaderID, Term: self.Log.Term,
		Ready: self.Ready, NotReady: self.NotReadyReason, OutboxDepth: int(self.OutboxDepth), OpenConflicts: int(self.OpenConflicts),
	}
	out.Health, out.HealthReasons = n.healthz()
	for _, p := range in.Plugins(ctx) {
		out.Plugins = append(out.Plugins, metrics.UIPlugin{Name: p.Name, Healthy: p.State == "healthy", State: p.State, Restarts: int(p.Restarts)})
	}
	for _, r := range n.mem.Refused() {
		out.Refused = append(out.Refused, metrics.UIRefusal{ID: r.ID, Reason: r.Reason})
	}
	members := in.Members(ctx)
	out.Members = make([]metrics.UIMember, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		row := &out.Members[i]
		*row = metrics.UIMember{ID: m.ID, APIAddr: m.APIAddr, Role: m.Role, Gossip: m.Status, Leader: m.Leader, Match: m.Match}
		if m.ID == n.cfg.NodeID {
			row.Reachable, row.Term, row.Commit, row.Applied = true, self.Log.Term, self.Log.Commit, self.Log.Applied
			row.Ready, row.NotReady, row.Health = self.Ready, self.NotReadyReason, self.Health
			row.OutboxDepth, row.Conflicts, row.Fingerprint, row.Version = self.OutboxDepth, self.OpenConflicts, self.Fingerprint, self.Version
			row.Lag = lag(row.Commit, row.Applied)
			continue
		}
		if m.APIAddr == "" {
			row.Error = "no API address gossiped"
			continue
		}
		wg.Add(1)
		go func(addr string) {
			defer wg.Done()
			st, err := remoteStatus(ctx, addr, &writv1.StatusRequest{WithoutStateHash: true})
			if err != nil {
				row.Error = "no answer from " + addr
				return
			}
			row.Reachable, row.Term, row.Commit, row.Applied = true, st.Term, st.Commit, st.Applied
			row.Ready, row.NotReady, row.Health = st.Ready, st.NotReadyReason, st.Health
			row.OutboxDepth, row.Conflicts, row.Fingerprint, row.Version = st.OutboxDepth, st.OpenConflicts, st.SchemaFingerprint, st.Version
			row.Lag = lag(row.Commit, row.Applied)
		}(m.APIAddr)
	}
	wg.Wait()
	metrics.SortMembers(out.Members)
	return out
}

func lag(commit, applied uint64) uint64 {
	if commit > applied {
		return commit - applied
	}
	return 0
}
