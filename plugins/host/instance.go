package host

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/writ-dev/writ/internal/backoff"
	"github.com/writ-dev/writ/pipeline"
	pb "github.com/writ-dev/writ/plugins/proto"
)

// instance is one configured plugin across its restarts.
type instance struct {
	h    *Host
	cfg  PluginConfig
	sum  []byte
	desc description // fixed at first start; restarts must declare the same

	mu        sync.Mutex
	client    *plugin.Client
	cmd       *exec.Cmd
	rpc       pb.HandlerClient
	pid       int
	gen       uint64 // bumps on every (re)start
	healthy   bool
	restarts  int
	lastErr   string
	startedAt time.Time
	backoff   time.Duration
	idle      []*evalStream // open evaluation streams of generation gen, unused
}

// maxIdleStreams bounds the open, unused evaluation streams kept per plugin
// (one per concurrent caller is reused; more are closed after use).
const maxIdleStreams = 8

// evalStream is one open Evaluate stream: one batch in flight at a time.
type evalStream struct {
	s      pb.Handler_EvaluateClient
	cancel context.CancelFunc
	gen    uint64
}

// dropIdle closes the idle streams. Callers hold i.mu.
func (i *instance) dropIdle() {
	for _, st := range i.idle {
		st.cancel()
	}
	i.idle = nil
}

// putStream returns a stream that answered its batch to the idle set, or
// closes it when its generation is gone or enough are idle.
func (i *instance) putStream(st *evalStream) {
	i.mu.Lock()
	if st.gen == i.gen && i.healthy && len(i.idle) < maxIdleStreams {
		i.idle = append(i.idle, st)
		st = nil
	}
	i.mu.Unlock()
	if st != nil {
		st.cancel()
	}
}

func (i *instance) label() string { return fmt.Sprintf("%q (%s)", i.desc.name, i.cfg.Path) }

// adopt makes p the instance's live process. Callers hold no lock.
func (i *instance) adopt(p *proc) {
	i.mu.Lock()
	i.client, i.cmd, i.rpc, i.pid = p.client, p.cmd, p.rpc, p.pid
	i.dropIdle()
	i.gen++
	i.healthy = true
	i.startedAt = time.Now()
	i.mu.Unlock()
}

// down marks generation gen as failed and starts the restart loop, once.
func (i *instance) down(gen uint64, reason string) {
	i.mu.Lock()
	if i.gen != gen || !i.healthy {
		i.mu.Unlock()
		return
	}
	i.healthy = false
	i.lastErr = reason
	i.dropIdle()
	client, cmd := i.client, i.cmd
	// A plugin that ran stably for a while restarts quickly; one that
	// keeps crashing backs off further each time.
	if time.Since(i.startedAt) > 6*i.h.cfg.RestartMax {
		i.backoff = 0
	}
	step := i.backoff
	pol := i.h.restartPolicy()
	backoff := pol.Next(&step)
	i.backoff = step
	i.mu.Unlock()

	i.h.mu.RLock()
	defer i.h.mu.RUnlock()
	if i.h.closed {
		return
	}
	i.h.logger.Warn("plugin down; restarting", "plugin", i.desc.name, "path", i.cfg.Path, "reason", reason, "backoff", backoff)
	i.h.wg.Add(1)
	go i.restart(client, cmd, pol, step, backoff)
}

// restart waits backoff, launches the plugin again and, while that fails,
// keeps waiting pol's next (jittered) delay after step.
func (i *instance) restart(old *plugin.Client, oldCmd *exec.Cmd, pol backoff.Policy, step, backoff time.Duration) {
	defer i.h.wg.Done()
	if old != nil {
		stop(old, oldCmd)
	}
	for {
		select {
		case <-i.h.stop:
			return
		case <-time.After(backoff):
		}
		p, err := i.h.launch(i.cfg, i.sum)
		if err == nil && !sameStrings(p.desc.types, i.desc.types) {
			stop(p.client, p.cmd)
			err = fmt.Errorf("host: plugin %s refused on restart: now serves %v, at start it served %v", i.label(), p.desc.types, i.desc.types)
		}
		if err != nil {
			i.mu.Lock()
			i.lastErr = "restart failed: " + err.Error()
			i.mu.Unlock()
			i.h.logger.Error("plugin restart failed", "plugin", i.desc.name, "error", err)
			backoff = pol.Next(&step)
			continue
		}
		i.h.mu.RLock()
		closed := i.h.closed
		if !closed {
			i.mu.Lock()
			i.restarts++
			i.mu.Unlock()
			i.adopt(p)
		}
		i.h.mu.RUnlock()
		if closed {
			stop(p.client, p.cmd)
		}
		return
	}
}

func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if a[k] != b[k] {
			return false
		}
	}
	return true
}

// call evaluates the items at idxs as one batch on an evaluation stream
// (an idle one, or a new one) and fills out.
func (i *instance) call(ctx context.Context, items []pipeline.EvalItem, idxs []int, out []pipeline.EvalResult) {
	i.mu.Lock()
	rpc, gen, healthy, lastErr := i.rpc, i.gen, i.healthy, i.lastErr
	var st *evalStream
	if n := len(i.idle); healthy && n > 0 {
		st = i.idle[n-1]
		i.idle = i.idle[:n-1]
	}
	i.mu.Unlock()
	unavailable := func(format string, args ...any) {
		e := &pipeline.EvalError{Kind: pipeline.EvalUnavailable, Msg: fmt.Sprintf("plugin %s: ", i.label()) + fmt.Sprintf(format, args...)}
		failItems(out, idxs, e)
	}
	if !healthy {
		unavailable("down (%s); restarting", lastErr)
		return
	}
	if err := ctx.Err(); err != nil {
		if st != nil {
			i.putStream(st)
		}
		unavailable("evaluation abandoned: %v", err)
		return
	}
	var err error
	if st == nil {
		// A stream outlives the call that opens it, so its context is
		// not the caller's; it is canceled to abandon a batch.
		sctx, cancel := context.WithCancel(context.Background())
		var s pb.Handler_EvaluateClient
		if s, err = rpc.Evaluate(sctx); err != nil {
			cancel()
			i.failed(gen, err, idxs, out)
			return
		}
		st = &evalStream{s: s, cancel: cancel, gen: gen}
	}
	// The stream is canceled if the plugin does not answer in time or the
	// caller gives up; either way it is not reused.
	var timedOut atomic.Bool
	timer := time.AfterFunc(i.h.cfg.CallTimeout, func() {
		timedOut.Store(true)
		st.cancel()
	})
	stopAfter := func() bool { return true }
	if ctx.Done() != nil {
		stopAfter = context.AfterFunc(ctx, st.cancel)
	}
	buf := encodeItems(items, idxs)
	err = st.s.Send(&pb.EvaluateRequest{Items: *buf})
	// gRPC has encoded the request by the time Send returns.
	releaseBuf(buf)
	var resp *pb.EvaluateResponse
	if err == nil || err == io.EOF {
		// After io.EOF from Send, Recv reports why the stream ended.
		resp, err = st.s.Recv()
	}
	timerStopped, afterStopped := timer.Stop(), stopAfter()
	if err != nil || !timerStopped || !afterStopped {
		st.cancel()
		switch {
		case err == nil:
			// Answered just as the stream was canceled: the answer is
			// whole, only the stream is not reused.
			i.h.decodeResults(i, items, idxs, resp.Results, out)
		case ctx.Err() != nil:
			// The caller gave up; the plugin is not at fault.
			unavailable("evaluation abandoned: %v", ctx.Err())
		case timedOut.Load():
			reason := fmt.Sprintf("did not answer within %s", i.h.cfg.CallTimeout)
			i.down(gen, reason)
			unavailable("%s", reason)
		default:
			i.failed(gen, err, idxs, out)
		}
		return
	}
	i.putStream(st)
	i.h.decodeResults(i, items, idxs, resp.Results, out)
}

// failed answers the items at idxs after the evaluation stream of
// generation gen failed with err: a broken connection marks the plugin
// down (UNAVAILABLE), anything else is an internal error for the items.
func (i *instance) failed(gen uint64, err error, idxs []int, out []pipeline.EvalResult) {
	kind := pipeline.EvalInternal
	msg := fmt.Sprintf("plugin %s: evaluate failed: %v", i.label(), err)
	switch code := status.Code(err); {
	case err == io.EOF:
		msg = fmt.Sprintf("plugin %s: evaluate failed: the plugin closed the evaluation stream", i.label())
	case code == codes.Unavailable || code == codes.Canceled:
		reason := fmt.Sprintf("connection lost: %v", status.Convert(err).Message())
		i.down(gen, reason)
		kind, msg = pipeline.EvalUnavailable, fmt.Sprintf("plugin %s: %s", i.label(), reason)
	}
	e := &pipeline.EvalError{Kind: kind, Msg: msg}
	failItems(out, idxs, e)
}
