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

	term, commit, applied, lag, leader, hasLeader, ready  *prometheus.Desc
	outboxDepth, outboxBytes, outboxOldest, conflictsOpen *prometheus.Desc
	pluginHealthy, pluginRestarts                         *prometheus.Desc
	inflight, maxInflight                                 *prometheus.Desc
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
	})
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.term, c.commit, c.applied, c.lag, c.leader, c.hasLeader, c.ready,
		c.outboxDepth, c.outboxBytes, c.outboxOldest, c.conflictsOpen, c.pluginHealthy, c.pluginRestarts, c.inflight, c.maxInflight} {
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
	for _, p := range s.Plugins {
		g(c.pluginHealthy, b2f(p.Healthy), p.Name)
		ch <- prometheus.MustNewConstMetric(c.pluginRestarts, prometheus.CounterValue, float64(p.Restarts), p.Name)
	}
}
