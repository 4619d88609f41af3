package node

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/writ-dev/writ/metrics"
	"github.com/writ-dev/writ/node/config"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/raftstore"
)

// SlowRequest is the request latency beyond which a request is logged with
// its stage timings.
const SlowRequest = time.Second

// grpcService is the API service name the health service reports on.
const grpcService = "writ.v1.Writ"

// obsState is the node's observability: metrics, their listener and the
// gRPC health service.
type obsState struct {
	m      *metrics.Metrics // nil: metrics off
	srv    *metrics.Server
	health *health.Server
	stop   chan struct{}
}

// initObs creates the metric families when metrics.addr is set (or in dev
// mode, on a kernel-chosen loopback port).
func (n *Node) initObs(cfg *config.Node) {
	n.obs.stop = make(chan struct{})
	if cfg.MetricsAddr != "" || cfg.Dev {
		n.obs.m = metrics.New()
		types := map[string]string{}
		for _, d := range n.cat.Types() {
			types[d.Name] = d.Class.String()
		}
		n.obs.m.DeclareTypes(types)
	}
}

// pipelineMetrics is what the pipeline reports to (nil when off).
func (n *Node) pipelineMetrics() pipeline.Metrics {
	if n.obs.m == nil {
		return nil
	}
	return &requestLog{Metrics: n.obs.m, log: n.log.With("component", "pipeline")}
}

// raftMetrics is what raftstore reports to (nil when off).
func (n *Node) raftMetrics() raftstore.Metrics {
	if n.obs.m == nil {
		return nil
	}
	return n.obs.m
}

// evaluator times the plugin host's calls.
func (n *Node) evaluator(e pipeline.Evaluator) pipeline.Evaluator {
	if n.obs.m == nil {
		return e
	}
	return &timedEvaluator{e: e, m: n.obs.m}
}

type timedEvaluator struct {
	e pipeline.Evaluator
	m *metrics.Metrics
}

func (t *timedEvaluator) Evaluate(ctx context.Context, items []pipeline.EvalItem) ([]pipeline.EvalResult, error) {
	t0 := time.Now()
	r, err := t.e.Evaluate(ctx, items)
	t.m.PluginCall(time.Since(t0), err != nil)
	return r, err
}

// requestLog observes finished requests: the "reply" stage and the
// slow-request log line.
type requestLog struct {
	*metrics.Metrics
	log *slog.Logger
}

func (r *requestLog) RequestDone(t pipeline.RequestTiming) {
	r.ObserveStage(metrics.StageReply, t.Total)
	if t.Total < SlowRequest {
		return
	}
	r.SlowRequest()
	r.log.Warn("pipeline: slow request", "request_id", t.ID, "type", t.Type, "status", t.Status,
		"total", t.Total, "queue_evaluate", t.Evaluate, "append", t.Append, "commit_wait", t.CommitWait)
}

var _ pipeline.RequestObserver = (*requestLog)(nil)

// startObs registers the gRPC health service (before the API serves) and
// starts the metrics listener.
func (n *Node) startObs(cfg *config.Node) error {
	n.obs.health = health.NewServer()
	healthpb.RegisterHealthServer(n.gs, n.obs.health)
	n.updateHealth()
	go n.runCatchUp()
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-n.obs.stop:
				return
			case <-t.C:
				n.updateHealth()
			}
		}
	}()
	addr := cfg.MetricsAddr
	if addr == "" && cfg.Dev {
		addr = "127.0.0.1:0"
	}
	if addr == "" {
		return nil
	}
	if n.obs.m != nil {
		n.obs.m.WatchState(n.metricsState)
	}
	srv, err := metrics.Serve(metrics.ServerConfig{Addr: addr, Metrics: n.obs.m, Ready: n.ready, Health: n.healthz, Pprof: cfg.Pprof, UIStatus: n.uiStatus, UISchema: n.uiSchema, UIFeed: n.uiFeed,
		UIConflicts: n.uiConflicts, UIResolve: n.uiResolve})
	if err != nil {
		n.stopObs()
		return startErr("metrics.addr %s: %v: stop whatever uses it or set metrics.addr (flag --metrics-addr)", addr, unwrapNet(err))
	}
	n.obs.srv = srv
	go func() {
		select {
		case err := <-srv.Err():
			n.fatal <- err
		case <-n.obs.stop:
		}
	}()
	return nil
}

// MetricsAddr is the bound metrics listener address ("" when off).
func (n *Node) MetricsAddr() string {
	if n.obs.srv == nil {
		return ""
	}
	return n.obs.srv.Addr()
}

func (n *Node) stopObs() {
	if n.obs.stop == nil {
		return
	}
	select {
	case <-n.obs.stop:
		return
	default:
		close(n.obs.stop)
	}
	if n.obs.health != nil {
		n.obs.health.Shutdown()
	}
	if n.obs.srv != nil {
		_ = n.obs.srv.Close()
	}
}

func (n *Node) updateHealth() {
	st := healthpb.HealthCheckResponse_SERVING
	if ok, _ := n.ready(); !ok {
		st = healthpb.HealthCheckResponse_NOT_SERVING
	}
	n.obs.health.SetServingStatus("", st)
	n.obs.health.SetServingStatus(grpcService, st)
}

// ready is /readyz: the node can serve writes (a leader is known, it is in
// the raft configuration, its plugins and outbox work).
func (n *Node) ready() (bool, string) {
	var why []string
	ls := n.rs.Status()
	if ls.LeaderID == "" {
		why = append(why, "no raft leader known (quorum lost or election in progress)")
	}
	for _, p := range n.host.Status() {
		if !p.Healthy {
			why = append(why, "plugin "+p.Name+" down: "+p.LastError)
		}
	}
	in := false
	for _, m := range n.rs.Members() {
		if m.ID == n.cfg.NodeID {
			in = true
		}
	}
	if !in {
		why = append(why, "not yet a member of the raft configuration (waiting to be added)")
	}
	return len(why) == 0, strings.Join(why, "; ")
}

// healthz is /healthz: ok, or degraded with the reasons (not ready, open
// conflict cases, a failed outbox).
func (n *Node) healthz() (string, []string) {
	var why []string
	if ok, r := n.ready(); !ok {
		why = append(why, "not ready: "+r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ps := n.pl.Status(ctx)
	if ps.OpenConflicts > 0 {
		why = append(why, "open conflict cases: "+strconv.Itoa(ps.OpenConflicts))
	}
	if ps.OutboxErr != "" {
		why = append(why, "outbox failed: "+ps.OutboxErr)
	}
	if len(why) == 0 && ps.Health == pipeline.HealthOK {
		return "ok", nil
	}
	if len(why) == 0 {
		why = append(why, "pipeline reports "+string(ps.Health))
	}
	return "degraded", why
}

func (n *Node) metricsState() metrics.State {
	ls := n.rs.Status()
	s := metrics.State{Term: ls.Term, Commit: ls.Commit, Applied: ls.Applied, IsLeader: ls.IsLeader, HasLeader: ls.LeaderID != ""}
	if cu := n.catchUpSelf(); cu != nil {
		s.CatchUp = &metrics.CatchUpState{Active: cu.Active, Behind: cu.Target - min(cu.Target, cu.Applied), Percent: cu.Percent,
			ETA: time.Duration(cu.EtaMs) * time.Millisecond}
	}
	s.Ready, _ = n.ready()
	ob := n.pl.Outbox()
	s.OutboxDepth, s.OutboxOldest = ob.Depth, ob.OldestAge
	for _, it := range ob.Items {
		s.OutboxBytes += int64(len(it.Payload))
	}
	adm := n.pl.Admission()
	s.Inflight, s.MaxInflight = adm.Inflight, adm.MaxInflight
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, open, err := n.pl.Health(ctx); err == nil {
		s.OpenConflicts = open
	}
	for _, p := range n.host.Status() {
		s.Plugins = append(s.Plugins, metrics.PluginState{Name: p.Name, Healthy: p.Healthy, Restarts: p.Restarts})
	}
	return s
}
