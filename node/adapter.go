package node

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/membership"
	"github.com/writ-dev/writ/node/config"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/schema/ir"
)

func base64Std(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// writer adapts the pipeline to api.Writer.
type writer struct{ n *Node }

var _ api.Writer = (*writer)(nil)

func toOutcome(s pipeline.Status) api.Outcome {
	switch s {
	case pipeline.StatusCommitted:
		return api.Committed
	case pipeline.StatusRejected:
		return api.Rejected
	case pipeline.StatusUnavailable:
		return api.Unavailable
	case pipeline.StatusUncertain:
		return api.Uncertain
	case pipeline.StatusNotCommitted:
		return api.NotCommitted
	}
	return api.Uncertain
}

func toEntry(e api.Entry) pipeline.Entry {
	f := pipeline.FormatJSON
	if e.Binary {
		f = pipeline.FormatBinary
	}
	return pipeline.Entry{Type: e.Type, ID: e.ID, Format: f, Payload: e.Payload}
}

func (w *writer) Submit(ctx context.Context, e api.Entry, timeout time.Duration) api.SubmitResult {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if err := w.n.wrongClass(e.Type, ir.ClassRequest); err != nil && w.n.isClass(e.Type, ir.ClassFact, ir.ClassReceipt) {
		return api.SubmitResult{Outcome: api.Rejected, ID: e.ID, Reason: err.Reason, Field: "type"}
	}
	if why := w.n.sch.gate(e.Type); why != "" {
		return api.SubmitResult{Outcome: api.Rejected, ID: e.ID, Reason: why, Field: "type"}
	}
	o := w.n.pl.Submit(ctx, toEntry(e))
	id := o.ID
	if id == "" {
		id = e.ID
	}
	reason := o.Reason
	if o.Duplicate && reason == "" {
		reason = fmt.Sprintf("duplicate request ID: first applied at index %d", o.Index)
	}
	return api.SubmitResult{Outcome: toOutcome(o.Status), ID: id, Index: o.Index, Result: o.Result, Reason: reason, Field: o.Field}
}

func ackErr(a pipeline.Ack) error {
	return &api.Error{Outcome: toOutcome(a.Status), ID: a.ID, Reason: a.Reason, Field: a.Field, Exhausted: a.Overloaded}
}

func (w *writer) Report(ctx context.Context, e api.Entry) (api.ReportResult, error) {
	if err := w.n.wrongClass(e.Type, ir.ClassFact); err != nil {
		return api.ReportResult{}, err
	}
	if why := w.n.sch.gate(e.Type); why != "" {
		return api.ReportResult{}, &api.Error{Outcome: api.Rejected, Field: "type", Reason: why}
	}
	a := w.n.pl.Report(ctx, toEntry(e))
	if !a.Received {
		return api.ReportResult{}, ackErr(a)
	}
	return api.ReportResult{ID: a.ID}, nil
}

func (w *writer) Deliver(ctx context.Context, e api.Entry) (api.DeliverResult, error) {
	if err := w.n.wrongClass(e.Type, ir.ClassReceipt); err != nil {
		return api.DeliverResult{}, err
	}
	if why := w.n.sch.gate(e.Type); why != "" {
		return api.DeliverResult{}, &api.Error{Outcome: api.Rejected, Field: "type", Reason: why}
	}
	a := w.n.pl.Deliver(ctx, toEntry(e))
	if !a.Received {
		return api.DeliverResult{}, ackErr(a)
	}
	return api.DeliverResult{ID: a.ID, ItemIDs: a.ItemIDs}, nil
}

func (w *writer) Outcome(ctx context.Context, q api.OutcomeQuery) (api.OutcomeResult, bool, error) {
	// A raw command ID as it appears on the watch stream (fact:<type>:<id>,
	// req:<id>, cfg:<id>:<phase>) is looked up in the log's table as it is;
	// anything else is a request ID.
	raw := strings.HasPrefix(q.ID, "fact:") || strings.HasPrefix(q.ID, "req:") || strings.HasPrefix(q.ID, "cfg:")
	o, ok, err := w.n.pl.Outcome(ctx, q.ID, pipeline.OutcomeQuery{Serializable: q.Serializable, Settle: q.Settle && !raw})
	if err != nil {
		return api.OutcomeResult{}, false, err
	}
	if ok {
		st := "applied"
		if o.Duplicate {
			st = "duplicate"
		}
		if o.Status != pipeline.StatusCommitted {
			st = strings.ToLower(o.Status.String())
		}
		return api.OutcomeResult{Outcome: toOutcome(o.Status), Index: o.Index, Status: st, Reason: o.Reason}, true, nil
	}
	if !raw {
		return api.OutcomeResult{}, false, nil
	}
	if r, ok := w.n.rs.Outcome(q.ID); ok {
		out := api.OutcomeResult{Index: r.Index, Status: r.Status.String(), Reason: r.Reason}
		switch r.Status {
		case kv.StatusApplied:
			out.Outcome = api.Committed
		case kv.StatusDuplicate:
			out.Outcome, out.Index = api.Committed, r.FirstIndex
		case kv.StatusRejected:
			out.Outcome = api.Rejected
		case kv.StatusFenced:
			out.Outcome, out.Status = api.NotCommitted, "not_committed"
		default:
			out.Outcome = api.Unavailable
		}
		return out, true, nil
	}
	return api.OutcomeResult{}, false, nil
}

func eventStatus(ev pipeline.Event) string {
	switch {
	case ev.Duplicate:
		return "duplicate"
	case ev.Status != pipeline.StatusCommitted:
		return strings.ToLower(ev.Status.String())
	case ev.Verdict != pipeline.VerdictNone:
		return strings.ToLower(ev.Verdict.String())
	}
	return "applied"
}

func (w *writer) Watch(ctx context.Context, f api.WatchFilter, send func(api.WatchEvent) error) error {
	wt := w.n.pl.Watch(f.From, pipeline.Filter{Types: f.Types, Key: f.Key})
	r := replayer{slots: w.n.replay, rate: w.n.cfg.API.WatchReplayRate}
	defer r.release()
	for {
		ev, err := r.next(ctx, wt)
		if err != nil {
			if ce := (*pipeline.CompactedError)(nil); errors.As(err, &ce) {
				return &api.CompactedError{First: ce.First}
			}
			return err
		}
		if canaryWatchDrops && ev.Index%37 == 0 {
			continue
		}
		if err := send(api.WatchEvent{Index: ev.Index, Type: ev.Type, Class: ev.Class.String(), Key: ev.Key, ID: ev.ID, Status: eventStatus(ev), Reason: ev.Reason}); err != nil {
			return err
		}
	}
}

func (w *writer) Conflicts(ctx context.Context) ([]kv.Record, error) {
	cs, err := w.n.pl.Conflicts(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]kv.Record, 0, len(cs))
	for _, c := range cs {
		b, _ := json.Marshal(c)
		out = append(out, kv.Record{Key: pipeline.ConflictKey(c.Machine, c.Instance), Value: b, Rev: c.Revision})
	}
	return out, nil
}

func (w *writer) Outbox(context.Context) (api.OutboxInfo, error) {
	st := w.n.pl.Outbox()
	out := api.OutboxInfo{Depth: uint64(st.Depth), OldestAge: st.OldestAge}
	now := time.Now()
	for _, it := range st.Items {
		out.Facts = append(out.Facts, api.OutboxFact{ID: it.ID, Type: it.Type, Age: now.Sub(it.Received)})
	}
	return out, nil
}

func versionOf(doc []byte) string {
	var v struct {
		Version string `json:"version"`
	}
	_ = json.Unmarshal(doc, &v)
	return v.Version
}

// ConfigShow returns writ's own cluster settings (see ConfigShowType).
func (w *writer) ConfigShow(ctx context.Context) (api.ConfigState, error) {
	return w.ConfigShowType(ctx, config.ClusterType)
}

func (w *writer) ConfigUpgrade(ctx context.Context, c api.ConfigChange, progress func(api.ConfigProgress)) (api.ConfigProgress, error) {
	d, err := w.n.configType(c.Type)
	if err != nil {
		return api.ConfigProgress{}, err
	}
	if err := w.checkConfigChange(ctx, d, c); err != nil {
		return api.ConfigProgress{}, err
	}
	progress(api.ConfigProgress{Phase: writv1.ConfigProgress_VALIDATED, Message: "document valid; staging"})
	n := w.n
	from := n.rs.Status().Applied + 1
	stageSeen := make(chan uint64, 1)
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	go func() {
		wt := n.pl.Watch(from, pipeline.Filter{})
		for {
			ev, err := wt.Next(wctx)
			if err != nil {
				return
			}
			if ev.ID == "cfg:"+c.ID+":stage" && ev.Status == pipeline.StatusCommitted {
				stageSeen <- ev.Index
				return
			}
		}
	}()
	h := n.pl.ConfigUpgradeAsync(ctx, pipeline.Entry{Type: d.Name, ID: c.ID, Payload: c.Document})
	var out pipeline.Outcome
	select {
	case idx := <-stageSeen:
		by, of := w.replicated(idx)
		progress(api.ConfigProgress{Phase: writv1.ConfigProgress_STAGED, Index: idx, CommittedBy: by, Of: of, Message: "stage committed; activating"})
		<-h.Done()
	case <-h.Done():
	}
	out = h.Outcome()
	if out.Status != pipeline.StatusCommitted {
		if out.Status == pipeline.StatusUncertain {
			return api.ConfigProgress{}, &api.Error{Outcome: api.Uncertain, ID: c.ID, Reason: out.Reason}
		}
		return api.ConfigProgress{Phase: writv1.ConfigProgress_FAILED, Outcome: toOutcome(out.Status), Index: out.Index, Message: out.Reason}, nil
	}
	if canaryConfigFailedAfterActivate {
		return api.ConfigProgress{Phase: writv1.ConfigProgress_FAILED, Outcome: api.NotCommitted, Index: out.Index, Message: "canary: activation committed, answered failed"}, nil
	}
	tag := versionOf(c.Document)
	by, of := w.replicated(out.Index)
	if d.Name != config.ClusterType {
		// the schema's handlers read it from the replicated state; no
		// node-local reload to wait for
		return api.ConfigProgress{Phase: writv1.ConfigProgress_ACTIVATED, Tag: tag, Index: out.Index, CommittedBy: by, Of: of, Outcome: api.Committed,
			Message: fmt.Sprintf("%s is active; handlers read it at %s", d.Name, configKey(d))}, nil
	}
	progress(api.ConfigProgress{Phase: writv1.ConfigProgress_ACTIVATED, Tag: tag, Index: out.Index, CommittedBy: by, Of: of, Outcome: api.Committed,
		Message: "activation committed by a majority"})
	reloaded, total, restart := w.reloadedEverywhere(ctx, tag, 5*time.Second, func(ok, total int) {
		progress(api.ConfigProgress{Phase: writv1.ConfigProgress_ACTIVATED, Tag: tag, Index: out.Index, CommittedBy: by, Of: of, Outcome: api.Committed,
			ActiveOn: uint32(ok), Members: uint32(total), Message: fmt.Sprintf("active on %d of %d members", ok, total)})
	})
	return api.ConfigProgress{Phase: writv1.ConfigProgress_RELOADED, Tag: tag, Index: out.Index, CommittedBy: by, Of: of, Outcome: api.Committed,
		ActiveOn: uint32(reloaded), Members: uint32(total), Message: fmt.Sprintf("reloaded on %d of %d nodes", reloaded, total), RestartRequired: restart}, nil
}

// replicated counts the voters whose log reaches idx (leader's view).
func (w *writer) replicated(idx uint64) (uint32, uint32) {
	ms := w.n.rs.Members()
	var by, of uint32
	for _, m := range ms {
		if !m.Voter {
			continue
		}
		of++
		if m.ID == w.n.cfg.NodeID || m.Match >= idx {
			by++
		}
	}
	return by, of
}

// reloadedEverywhere asks every member's API for its configuration tag
// until all report tag or d passes; seen is called each time more members
// report it (and once with the first count).
func (w *writer) reloadedEverywhere(ctx context.Context, tag string, d time.Duration, seen func(ok, total int)) (int, int, []string) {
	deadline := time.Now().Add(d)
	var restart []string
	lastOK := -1
	for {
		restart = restart[:0]
		members := (&info{n: w.n}).Members(ctx)
		ok, total := 0, 0
		for _, m := range members {
			if m.Role == "" || m.APIAddr == "" {
				continue
			}
			total++
			st, err := remoteStatus(ctx, m.APIAddr)
			if err == nil && st.ConfigTag == tag {
				ok++
				for _, r := range st.RestartRequired {
					restart = append(restart, m.ID+": "+r)
				}
			}
		}
		if ok > lastOK && ok < total {
			seen(ok, total)
			lastOK = ok
		}
		if ok == total || time.Now().After(deadline) {
			return ok, total, restart
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func remoteStatus(ctx context.Context, addr string, req ...*writv1.StatusRequest) (*writv1.StatusResponse, error) {
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	r := &writv1.StatusRequest{}
	if len(req) > 0 {
		r = req[0]
	}
	return writv1.NewWritClient(c).Status(ctx, r)
}

// info adapts the node to api.Info.
type info struct{ n *Node }

var _ api.Info = (*info)(nil)

func (i *info) Route(context.Context) api.Route {
	n := i.n
	ls := n.rs.Status()
	r := api.Route{NodeID: ls.NodeID, IsLeader: ls.IsLeader, APIAddr: n.APIAddr()}
	if ls.LeaderID != "" && !ls.IsLeader {
		r.LeaderAPI = i.apiOf(ls.LeaderID)
	}
	return r
}

func (i *info) Status(ctx context.Context) api.NodeStatus {
	n := i.n
	ps := n.pl.Status(ctx)
	ls := ps.Log
	st := api.NodeStatus{
		Log: ls, Health: string(ps.Health), APIAddr: n.APIAddr(), RaftAddr: n.rs.Addr(), GossipAddr: n.mem.Addr(),
		Fingerprint: ps.Fingerprint, OutboxDepth: uint64(ps.OutboxDepth), OpenConflicts: uint64(ps.OpenConflicts), Version: Version,
		Admission: admissionOf(n.pl.Admission()),
		CatchUp:   n.catchUpSelf(),
	}
	n.mu.Lock()
	st.ConfigTag = n.cfgTag
	st.RestartRequired = append([]string(nil), n.restart...)
	n.mu.Unlock()
	st.Insecure = append([]string(nil), n.cfg.InsecureMissing...)
	// The tag is the configuration this node has loaded (set by the
	// activation hook), so "reloaded" means the hook ran here.
	if st.ConfigTag == "" && ps.Config != nil && ps.Config.Type == config.ClusterType {
		st.ConfigTag = versionOf(ps.Config.Doc)
	}
	if st.ConfigTag == "" {
		st.ConfigTag = "0"
	}
	if ls.LeaderID != "" {
		st.LeaderAPI = i.apiOf(ls.LeaderID)
	}
	if !api.StateHashSkipped(ctx) {
		if idx, h, err := n.rs.StateHash(); err == nil {
			st.StateIndex, st.StateHash = idx, hex.EncodeToString(h[:])
		}
	}
	var why []string
	if ls.LeaderID == "" {
		why = append(why, "no raft leader known")
	}
	for _, p := range n.host.Status() {
		if !p.Healthy {
			why = append(why, "plugin "+p.Name+" down: "+p.LastError)
		}
	}
	if ps.OutboxErr != "" {
		why = append(why, "outbox failed: "+ps.OutboxErr)
	}
	inConfig := false
	for _, m := range n.rs.Members() {
		if m.ID == n.cfg.NodeID {
			inConfig = true
		}
	}
	if !inConfig {
		why = append(why, "not yet a member of the raft configuration (waiting to be added)")
	}
	st.Ready = len(why) == 0
	st.NotReadyReason = strings.Join(why, "; ")
	return st
}

func (i *info) apiOf(id string) string {
	if id == i.n.cfg.NodeID {
		return i.n.APIAddr()
	}
	for _, m := range i.n.mem.View().Members {
		if m.ID == id {
			return m.Tags[membership.TagAPIAddr]
		}
	}
	return ""
}

func (i *info) Members(context.Context) []api.MemberInfo {
	v := i.n.mem.View()
	leader := i.n.rs.Status().LeaderID
	var out []api.MemberInfo
	for _, m := range v.Members {
		out = append(out, api.MemberInfo{
			ID: m.ID, RaftAddr: m.Tags[membership.TagRaftAddr], APIAddr: m.Tags[membership.TagAPIAddr], GossipAddr: m.GossipAddr,
			Role: m.Raft, Status: m.Gossip, Match: m.Match, Leader: m.ID == leader, Fingerprint: m.Tags[membership.TagFingerprint],
			Refused: m.Refused, CatchUp: i.n.catchUpOf(m.ID),
		})
	}
	return out
}

func (i *info) Plugins(context.Context) []api.PluginInfo {
	var out []api.PluginInfo
	for _, p := range i.n.host.Status() {
		state := "healthy"
		if !p.Healthy {
			state = "down"
			if p.LastError != "" {
				state += ": " + p.LastError
			}
		}
		out = append(out, api.PluginInfo{Name: p.Name + " " + p.Version, Path: p.Path, State: state, Types: p.Types, Restarts: uint32(p.Restarts)})
	}
	return out
}

// agentView is what the API adapter uses from the membership agent.
type agentView interface {
	Refused() []membership.Refusal
	InstallKey(key string) (membership.KeyReport, error)
	UseKey(key string) (membership.KeyReport, error)
	RemoveKey(key string) (membership.KeyReport, error)
	ListKeys() (membership.KeyReport, error)
	Promote(ctx context.Context, id string) error
}

var _ agentView = (*membership.Agent)(nil)

// members adapts the membership agent to api.Membership.
type members struct{ a agentView }

var _ api.Membership = (*members)(nil)

func (m *members) Refused(context.Context) []api.Refusal {
	return refusalsToAPI(m.a.Refused())
}

// Promote asks the agent to promote learner id (it checks the
// reconciler's conditions and logs the change).
func (m *members) Promote(ctx context.Context, id string) error {
	err := m.a.Promote(ctx, id)
	if errors.Is(err, membership.ErrNotLeader) {
		return fmt.Errorf("node: %w: %w", api.ErrNotLeader, err)
	}
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	return nil
}

func refusalsToAPI(rs []membership.Refusal) []api.Refusal {
	var out []api.Refusal
	for _, r := range rs {
		out = append(out, api.Refusal{ID: r.ID, GossipAddr: r.Addr, RaftAddr: r.RaftAddr, Fingerprint: r.Fingerprint, Reason: r.Reason, Since: r.Since})
	}
	return out
}

// Keyring runs the operation on the agent; serf's key queries are
// synchronous, so ctx only bounds how long the caller waits for the answer.
func (m *members) Keyring(ctx context.Context, op api.KeyOp, key string) (api.KeyReport, error) {
	type res struct {
		rep membership.KeyReport
		err error
	}
	ch := make(chan res, 1)
	go func() {
		var r res
		switch op {
		case api.KeyInstall:
			r.rep, r.err = m.a.InstallKey(key)
		case api.KeyUse:
			r.rep, r.err = m.a.UseKey(key)
		case api.KeyRemove:
			r.rep, r.err = m.a.RemoveKey(key)
		case api.KeyList:
			r.rep, r.err = m.a.ListKeys()
		default:
			r.err = fmt.Errorf("node: keyring op %v unknown", op)
		}
		ch <- r
	}()
	select {
	case <-ctx.Done():
		return api.KeyReport{}, fmt.Errorf("node: keyring %v: %w (the operation may still complete; it is safe to rerun)", op, ctx.Err())
	case r := <-ch:
		rep := api.KeyReport{NumNodes: r.rep.NumNodes, NumResp: r.rep.NumResp, NumErr: r.rep.NumErr, Messages: r.rep.Messages, Keys: r.rep.Keys, PrimaryKeys: r.rep.PrimaryKeys}
		if errors.Is(r.err, membership.ErrNotEncrypted) {
			return rep, api.ErrNotEncrypted
		}
		return rep, r.err
	}
}
