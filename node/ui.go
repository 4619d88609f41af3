package node

import (
	"context"
	"strings"
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
			row.CatchUp = uiCatchUp(self.CatchUp)
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
			row.CatchUp = uiCatchUp(st.CatchUp)
		}(m.APIAddr)
	}
	wg.Wait()
	metrics.SortMembers(out.Members)
	return out
}

func uiCatchUp(c *writv1.CatchUp) *metrics.UICatchUp {
	if c == nil {
		return nil
	}
	return &metrics.UICatchUp{Active: c.Active, Applied: c.Applied, Target: c.Target, Percent: c.Percent, Rate: c.EntriesPerSecond, ETAms: c.EtaMs}
}

func lag(commit, applied uint64) uint64 {
	if commit > applied {
		return commit - applied
	}
	return 0
}

// uiSchema is the dashboard's view of the schema this node runs: the
// classification table and each machine with the entry types that drive
// its transitions.
func (n *Node) uiSchema() metrics.UISchema {
	out := metrics.UISchema{Fingerprint: n.cat.Fingerprint()}
	for _, d := range n.cat.Types() {
		t := metrics.UIType{Number: d.Number, Name: d.Name, Class: d.Class.String(), Keys: strings.Join(d.Entry.Keys, " ")}
		if d.Machine != nil {
			t.Machine = d.Machine.Name
		}
		out.Types = append(out.Types, t)
	}
	s := n.cat.Schema()
	for _, m := range s.Machines {
		drives := s.Drivers(m)
		um := metrics.UIMachine{Name: m.Name, Key: m.Key, States: m.States, Initial: m.Initial, Terminal: m.Terminal, Creators: map[string][]string{}}
		for _, from := range m.States {
			for _, to := range m.Transitions[from] {
				um.Transitions = append(um.Transitions, metrics.UITransition{From: from, To: to, By: drives[to]})
			}
		}
		for _, st := range m.Initial {
			um.Creators[st] = drives[st]
		}
		out.Machines = append(out.Machines, um)
	}
	return out
}
