package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// State is what a node reports at scrape time: gauges read from its
// components rather than pushed on every change.
type State struct {
	Term, Commit, Applied uint64
	IsLeader, HasLeader   bool
	Ready                 bool
	OutboxDepth           int
	OutboxBytes           int64
	OutboxOldest          time.Duration
	OpenConflicts         int
	Plugins               []PluginState
	// Admission control: requests in flight and the bound.
	Inflight, MaxInflight int
	// CatchUp is this node's progress towards the leader's commit index
	// (nil on the leader and before the first sample).
	CatchUp *CatchUpState
}

// CatchUpState is a node's catch-up: how far behind the leader's commit
// its applied index is, the share of the gap closed, and the estimate.
type CatchUpState struct {
	Active  bool
	Behind  uint64
	Percent float64
	ETA     time.Duration
}

// PluginState is one handler plugin.
type PluginState struct {
	Name     string
	Healthy  bool
	Restarts int
}

// stateCollector turns State into gauges at every scrape.
type stateCollector struct {
	read func() State

	term, commit, applied, lag, leader, hasLeader, ready     *prometheus.Desc
	outboxDepth, outboxBytes, outboxOldest, conflictsOpen    *prometheus.Desc
	pluginHealthy, pluginRestarts                            *prometheus.Desc
	inflight, maxInflight                                    *prometheus.Desc
	catchUpActive, catchUpBehind, catchUpPercent, catchUpETA *prometheus.Desc
}

// WatchState registers a collector that calls read at every scrape.
func (m *Metrics) WatchState(read func() State) {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	m.reg.MustRegister(&stateCollector{
		read:           read,
		term:           d("writ_raft_term", "Current raft term."),
		commit:         d("writ_raft_commit_index", "Highest log index known committed."),
		applied:        d("writ_raft_applied_index", "Highest log index applied to this node's state."),
		lag:            d("writ_raft_apply_lag", "Committed entries not yet applied here (commit - applied)."),
		leader:         d("writ_raft_is_leader", "1 when this node is the raft leader."),
		hasLeader:      d("writ_raft_has_leader", "1 when this node knows a raft leader."),
		ready:          d("writ_ready", "1 when /readyz reports ready."),
		outboxDepth:    d("writ_outbox_depth", "Facts retained in the outbox, not yet known committed."),
		outboxBytes:    d("writ_outbox_bytes", "Payload bytes of the retained facts."),
		outboxOldest:   d("writ_outbox_oldest_age_seconds", "Age of the oldest retained fact (0 when empty)."),
		conflictsOpen:  d("writ_conflicts_open", "Open conflict cases (quarantined machines)."),
		pluginHealthy:  d("writ_plugin_healthy", "1 when the handler plugin is running and serving.", "plugin"),
		pluginRestarts: d("writ_plugin_restarts_total", "Restarts of the handler plugin since the node started.", "plugin"),
		inflight:       d("writ_requests_inflight", "Requests in flight on this node (admitted, not yet answered)."),
		maxInflight:    d("writ_requests_max_inflight", "The bound on requests in flight (max_inflight); 0: none."),
		catchUpActive:  d("writ_catchup_active", "1 while this node catches up with the leader's commit index."),
		catchUpBehind:  d("writ_catchup_behind_entries", "Entries between this node's applied index and the leader's commit index (0 on the leader)."),
		catchUpPercent: d("writ_catchup_percent", "Share of the current catch-up's gap closed (100 when none runs)."),
		catchUpETA:     d("writ_catchup_eta_seconds", "Estimated time until the current catch-up is done (0: none or unknown)."),
	})
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.term, c.commit, c.applied, c.lag, c.leader, c.hasLeader, c.ready,
		c.outboxDepth, c.outboxBytes, c.outboxOldest, c.conflictsOpen, c.pluginHealthy, c.pluginRestarts, c.inflight, c.maxInflight,
		c.catchUpActive, c.catchUpBehind, c.catchUpPercent, c.catchUpETA} {
		ch <- d
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.read()
	g := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	g(c.term, float64(s.Term))
	g(c.commit, float64(s.Commit))
	g(c.applied, float64(s.Applied))
	lag := 0.0
	if s.Commit > s.Applied {
		lag = float64(s.Commit - s.Applied)
	}
	g(c.lag, lag)
	g(c.leader, b2f(s.IsLeader))
	g(c.hasLeader, b2f(s.HasLeader))
	g(c.ready, b2f(s.Ready))
	g(c.outboxDepth, float64(s.OutboxDepth))
	g(c.outboxBytes, float64(s.OutboxBytes))
	g(c.outboxOldest, s.OutboxOldest.Seconds())
	g(c.conflictsOpen, float64(s.OpenConflicts))
	g(c.inflight, float64(s.Inflight))
	g(c.maxInflight, float64(s.MaxInflight))
	cu := CatchUpState{Percent: 100}
	if s.CatchUp != nil {
		cu = *s.CatchUp
	}
	g(c.catchUpActive, b2f(cu.Active))
	g(c.catchUpBehind, float64(cu.Behind))
	g(c.catchUpPercent, cu.Percent)
	g(c.catchUpETA, cu.ETA.Seconds())
	for _, p := range s.Plugins {
		g(c.pluginHealthy, b2f(p.Healthy), p.Name)
		ch <- prometheus.MustNewConstMetric(c.pluginRestarts, prometheus.CounterValue, float64(p.Restarts), p.Name)
	}
}
