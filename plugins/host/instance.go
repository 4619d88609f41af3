package host

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"time"

	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
}

func (i *instance) label() string { return fmt.Sprintf("%q (%s)", i.desc.name, i.cfg.Path) }

// adopt makes p the instance's live process. Callers hold no lock.
func (i *instance) adopt(p *proc) {
	i.mu.Lock()
	i.client, i.cmd, i.rpc, i.pid = p.client, p.cmd, p.rpc, p.pid
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
	client, cmd := i.client, i.cmd
	// A plugin that ran stably for a while restarts quickly; one that
	// keeps crashing backs off further each time.
	if i.backoff == 0 || time.Since(i.startedAt) > 6*i.h.cfg.RestartMax {
		i.backoff = i.h.cfg.RestartMin
	} else {
		i.backoff = min(2*i.backoff, i.h.cfg.RestartMax)
	}
	backoff := i.backoff
	i.mu.Unlock()

	i.h.mu.RLock()
	defer i.h.mu.RUnlock()
	if i.h.closed {
		return
	}
	i.h.logger.Warn("plugin down; restarting", "plugin", i.desc.name, "path", i.cfg.Path, "reason", reason, "backoff", backoff)
	i.h.wg.Add(1)
	go i.restart(client, cmd, backoff)
}

func (i *instance) restart(old *plugin.Client, oldCmd *exec.Cmd, backoff time.Duration) {
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
			backoff = min(2*backoff, i.h.cfg.RestartMax)
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

// call evaluates the items at idxs with one Evaluate call and fills out.
func (i *instance) call(ctx context.Context, items []pipeline.EvalItem, idxs []int, out []pipeline.EvalResult) {
	i.mu.Lock()
	rpc, gen, healthy, lastErr := i.rpc, i.gen, i.healthy, i.lastErr
	i.mu.Unlock()
	unavailable := func(format string, args ...any) {
		e := &pipeline.EvalError{Kind: pipeline.EvalUnavailable, Msg: fmt.Sprintf("plugin %s: ", i.label()) + fmt.Sprintf(format, args...)}
		for _, k := range idxs {
			out[k] = pipeline.EvalResult{Err: e}
		}
	}
	if !healthy {
		unavailable("down (%s); restarting", lastErr)
		return
	}
	buf := encodeItems(items, idxs)
	req := &pb.EvaluateRequest{Items: *buf}
	cctx, cancel := context.WithTimeout(ctx, i.h.cfg.CallTimeout)
	defer cancel()
	resp, err := rpc.Evaluate(cctx, req)
	// gRPC has encoded the request by the time Evaluate returns.
	releaseBuf(buf)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			// The caller gave up; the plugin is not at fault.
			unavailable("evaluation abandoned: %v", ctx.Err())
		case errors.Is(cctx.Err(), context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded:
			// The plugin's side may notice the propagated deadline first.
			reason := fmt.Sprintf("did not answer within %s", i.h.cfg.CallTimeout)
			i.down(gen, reason)
			unavailable("%s", reason)
		case status.Code(err) == codes.Unavailable || status.Code(err) == codes.Canceled:
			reason := fmt.Sprintf("connection lost: %v", status.Convert(err).Message())
			i.down(gen, reason)
			unavailable("%s", reason)
		default:
			e := &pipeline.EvalError{Kind: pipeline.EvalInternal, Msg: fmt.Sprintf("plugin %s: evaluate failed: %v", i.label(), err)}
			for _, k := range idxs {
				out[k] = pipeline.EvalResult{Err: e}
			}
		}
		return
	}
	i.h.decodeResults(i, items, idxs, resp.Results, out)
}
