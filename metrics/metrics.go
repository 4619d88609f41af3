// Package metrics is writd's Prometheus instrumentation: the metric
// families, the hooks the pipeline, raftstore and plugin host report to
// (each of those packages declares the small interface it needs; this
// package implements them), and the HTTP listener that serves /metrics, the
// health endpoints, the built-in dashboard (/ui/, assets embedded from ui/)
// and, when enabled, pprof.
//
// Families are registered in a Registry of their own; the listener also
// serves the process-wide default registry, which holds the Go runtime and
// process collectors and where etcd's WAL package registers its fsync and
// write histograms.
package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Stage names, as the pipeline reports them.
const (
	StageValidate   = "validate"
	StageEvaluate   = "evaluate"
	StageAppend     = "append"
	StageCommitWait = "commit_wait"
	StageApply      = "apply"
	StageReply      = "reply"
)

var stages = []string{StageValidate, StageEvaluate, StageAppend, StageCommitWait, StageApply, StageReply}

// latencyBuckets span 50µs to ~6.5s.
var latencyBuckets = prometheus.ExponentialBuckets(50e-6, 2, 18)

// Metrics holds every writ metric family of one node.
type Metrics struct {
	reg *prometheus.Registry

	stage      *prometheus.HistogramVec
	stageObs   [6]prometheus.Observer
	outcomes   *prometheus.CounterVec
	latchWaits prometheus.Counter
	admission  *prometheus.CounterVec

	leaderChanges     prometheus.Counter
	proposalsDropped  prometheus.Counter
	snapshots         prometheus.Counter
	snapshotDuration  prometheus.Histogram
	stateCommit       prometheus.Histogram
	peerSentMsgs      *prometheus.CounterVec
	peerSentBytes     *prometheus.CounterVec
	peerRecvMsgs      *prometheus.CounterVec
	peerRecvBytes     *prometheus.CounterVec
	pluginCall        prometheus.Histogram
	pluginCallErrors  prometheus.Counter
	requestsSlowTotal prometheus.Counter

	// Series looked up once and kept: the hot path (every entry's
	// outcome, every transport frame) then costs a map read instead of
	// the vector's label hashing and locking.
	outcomeCache sync.Map // outcomeKey -> prometheus.Counter
	peerCache    sync.Map // peer -> *peerCounters
}

type outcomeKey struct{ typ, class, outcome string }

type peerCounters struct{ sentMsgs, sentBytes, recvMsgs, recvBytes prometheus.Counter }

// New creates the families in a fresh registry.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.stage = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "writ_stage_duration_seconds", Help: "Time spent in each write-path stage: validate (per entry), evaluate, append, commit_wait, apply (per batch), reply (per request, ingress to outcome).",
		Buckets: latencyBuckets,
	}, []string{"stage"})
	for i, s := range stages {
		m.stageObs[i] = m.stage.WithLabelValues(s)
	}
	m.outcomes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "writ_entries_total", Help: "Entries by type, class and outcome (COMMITTED, REJECTED, UNAVAILABLE, UNCERTAIN, NOT_COMMITTED, RECEIVED, duplicate, stale, quarantined).",
	}, []string{"type", "class", "outcome"})
	m.latchWaits = prometheus.NewCounter(prometheus.CounterOpts{Name: "writ_pipeline_latch_waits_total", Help: "Times a queued entry waited for a key latch held by an entry in flight."})
	m.admission = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "writ_admission_refusals_total", Help: "Entries refused at ingress, by reason (validation, class, stopped, outbox; admission control: inflight, outbox_entries, outbox_bytes)."}, []string{"reason"})
	m.leaderChanges = prometheus.NewCounter(prometheus.CounterOpts{Name: "writ_raft_leader_changes_total", Help: "Leader changes this node has seen."})
	m.proposalsDropped = prometheus.NewCounter(prometheus.CounterOpts{Name: "writ_raft_proposals_dropped_total", Help: "Proposals refused by consensus (no leader, uncommitted-size bound); definitely not appended."})
	m.snapshots = prometheus.NewCounter(prometheus.CounterOpts{Name: "writ_raft_snapshots_total", Help: "Snapshots taken by this node."})
	m.snapshotDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "writ_raft_snapshot_duration_seconds", Help: "Time to take a snapshot (state sync, save, compaction).", Buckets: latencyBuckets})
	m.stateCommit = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "writ_bbolt_commit_duration_seconds", Help: "Duration of a bbolt state transaction commit (including its fsync).", Buckets: latencyBuckets})
	m.peerSentMsgs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "writ_transport_sent_messages_total", Help: "Raft messages sent, by peer raft ID."}, []string{"peer"})
	m.peerSentBytes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "writ_transport_sent_bytes_total", Help: "Raft transport frame bytes sent, by peer raft ID."}, []string{"peer"})
	m.peerRecvMsgs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "writ_transport_received_messages_total", Help: "Raft messages received, by peer raft ID."}, []string{"peer"})
	m.peerRecvBytes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "writ_transport_received_bytes_total", Help: "Raft transport frame bytes received, by peer raft ID."}, []string{"peer"})
	m.pluginCall = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "writ_plugin_call_duration_seconds", Help: "Duration of one handler evaluation call (a batch) through the plugin host.", Buckets: latencyBuckets})
	m.pluginCallErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "writ_plugin_call_errors_total", Help: "Handler evaluation calls that failed as a whole."})
	m.requestsSlowTotal = prometheus.NewCounter(prometheus.CounterOpts{Name: "writ_requests_slow_total", Help: "Requests slower than the slow-request threshold (each is logged with its stage timings)."})
	m.reg.MustRegister(m.stage, m.outcomes, m.latchWaits, m.admission, m.leaderChanges, m.proposalsDropped,
		m.snapshots, m.snapshotDuration, m.stateCommit, m.peerSentMsgs, m.peerSentBytes, m.peerRecvMsgs, m.peerRecvBytes,
		m.pluginCall, m.pluginCallErrors, m.requestsSlowTotal)
	return m
}

// Outcomes lists the outcome label values of writ_entries_total.
var Outcomes = []string{"COMMITTED", "REJECTED", "UNAVAILABLE", "UNCERTAIN", "NOT_COMMITTED", "RECEIVED", "duplicate", "stale", "quarantined"}

// DeclareTypes creates the writ_entries_total series of every declared
// type (name → class) at zero, so that dashboards and rate() see a series
// before its first entry; it also creates the "validation" refusal series.
func (m *Metrics) DeclareTypes(types map[string]string) {
	for typ, class := range types {
		for _, o := range Outcomes {
			m.outcomes.WithLabelValues(typ, class, o)
		}
	}
	m.admission.WithLabelValues("validation")
}

// Registry is where the families live (for extra collectors).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// ---- pipeline hooks -----------------------------------------------------

// ObserveStage records one stage duration.
func (m *Metrics) ObserveStage(stage string, d time.Duration) {
	for i, s := range stages {
		if s == stage {
			m.stageObs[i].Observe(d.Seconds())
			return
		}
	}
	m.stage.WithLabelValues(stage).Observe(d.Seconds())
}

// CountOutcome counts one entry outcome.
func (m *Metrics) CountOutcome(typ, class, outcome string) {
	k := outcomeKey{typ, class, outcome}
	if c, ok := m.outcomeCache.Load(k); ok {
		c.(prometheus.Counter).Inc()
		return
	}
	c := m.outcomes.WithLabelValues(typ, class, outcome)
	m.outcomeCache.Store(k, c)
	c.Inc()
}

// LatchWait counts one latch wait.
func (m *Metrics) LatchWait() { m.latchWaits.Inc() }

// AdmissionRefused counts one refusal at ingress.
func (m *Metrics) AdmissionRefused(reason string) { m.admission.WithLabelValues(reason).Inc() }

// SlowRequest counts one slow request.
func (m *Metrics) SlowRequest() { m.requestsSlowTotal.Inc() }

// ---- raftstore hooks ----------------------------------------------------

// LeaderChanged counts a leader change.
func (m *Metrics) LeaderChanged() { m.leaderChanges.Inc() }

// ProposalDropped counts a refused proposal.
func (m *Metrics) ProposalDropped() { m.proposalsDropped.Inc() }

// SnapshotTaken records one snapshot.
func (m *Metrics) SnapshotTaken(d time.Duration) {
	m.snapshots.Inc()
	m.snapshotDuration.Observe(d.Seconds())
}

// StateCommitted records one bbolt commit.
func (m *Metrics) StateCommitted(d time.Duration) { m.stateCommit.Observe(d.Seconds()) }

// peer is the transport counters of one peer.
func (m *Metrics) peer(id string) *peerCounters {
	if p, ok := m.peerCache.Load(id); ok {
		return p.(*peerCounters)
	}
	p := &peerCounters{sentMsgs: m.peerSentMsgs.WithLabelValues(id), sentBytes: m.peerSentBytes.WithLabelValues(id),
		recvMsgs: m.peerRecvMsgs.WithLabelValues(id), recvBytes: m.peerRecvBytes.WithLabelValues(id)}
	m.peerCache.Store(id, p)
	return p
}

// PeerSent records one frame sent to a peer.
func (m *Metrics) PeerSent(peer string, msgs, bytes int) {
	p := m.peer(peer)
	p.sentMsgs.Add(float64(msgs))
	p.sentBytes.Add(float64(bytes))
}

// PeerReceived records one frame received from a peer.
func (m *Metrics) PeerReceived(peer string, msgs, bytes int) {
	p := m.peer(peer)
	p.recvMsgs.Add(float64(msgs))
	p.recvBytes.Add(float64(bytes))
}

// ---- plugin host --------------------------------------------------------

// PluginCall records one evaluation call.
func (m *Metrics) PluginCall(d time.Duration, failed bool) {
	m.pluginCall.Observe(d.Seconds())
	if failed {
		m.pluginCallErrors.Inc()
	}
}
