package membership

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/serf/serf"
	"github.com/writ-dev/writ/kv"
)

// Agent is one node's gossip agent and membership reconciler.
type Agent struct {
	cfg      Config
	log      *slog.Logger
	pushPull time.Duration // memberlist anti-entropy interval
	// leftGrace is how long a member must stay "left" before the leader
	// removes it for that (policy.leftGrace).
	leftGrace time.Duration
	serf      *serf.Serf
	events    chan serf.Event
	// snapshotPeers are the members serf's snapshot names to rejoin.
	snapshotPeers []string

	trigger chan struct{}
	stop    chan struct{}
	wg      sync.WaitGroup

	mu          sync.Mutex
	self        string // advertised gossip host:port; "" until created
	voters      Voters
	known       map[string]serf.Member // from member events, for the merge check
	refused     map[string]Refusal     // by node ID
	dupRefused  map[string]Refusal     // by gossip address: duplicate IDs
	failedSince map[string]time.Time
	peerChecks  map[string]peerCheck // by node ID (peercheck.go)
	joinDup     error
	lastChange  string
	lastError   string
	waiting     string
	stopped     bool
}

// Start validates cfg, starts the gossip agent, joins the seeds and starts
// the event drain and the reconciler. voters may be nil and attached later
// with SetVoters; until then the agent only gossips and reports.
func Start(cfg Config, voters Voters) (*Agent, error) {
	if iv, ok := voters.(IncarnationVoters); ok && cfg.Incarnation == 0 {
		cfg.Incarnation = iv.Incarnation()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	kr, err := loadKeyring(&cfg)
	if err != nil {
		return nil, err
	}
	a := &Agent{
		cfg:         cfg,
		log:         cfg.Logger.With("node", cfg.NodeID),
		events:      make(chan serf.Event, 1024),
		trigger:     make(chan struct{}, 1),
		stop:        make(chan struct{}),
		voters:      voters,
		known:       make(map[string]serf.Member),
		refused:     make(map[string]Refusal),
		dupRefused:  make(map[string]Refusal),
		failedSince: make(map[string]time.Time),
		peerChecks:  make(map[string]peerCheck),
	}

	sc := serf.DefaultConfig()
	sc.NodeName = cfg.NodeID
	sc.Tags = cfg.tags()
	sc.EventCh = a.events
	sc.EnableNameConflictResolution = false // the merge check refuses duplicates instead
	sc.Merge = &mergeDelegate{a: a}
	sc.KeyringFile = cfg.KeyringFile
	sc.SnapshotPath = cfg.SnapshotPath
	logger := log.New(&logWriter{a: a}, "", 0)
	sc.Logger = logger
	sc.LogOutput = nil
	mc := memberlistConfig(cfg.Profile)
	mc.Name = cfg.NodeID
	tr, err := newBoundTransport(cfg.BindAddr, cfg.BindPort, logger)
	if err != nil {
		return nil, err
	}
	mc.Transport = tr
	mc.BindAddr = cfg.BindAddr
	mc.BindPort = tr.GetAutoBindPort()
	mc.AdvertisePort = mc.BindPort
	if cfg.AdvertiseAddr != "" {
		mc.AdvertiseAddr = cfg.AdvertiseAddr
	}
	if cfg.AdvertisePort != 0 {
		mc.AdvertisePort = cfg.AdvertisePort
	}
	mc.Keyring = kr
	mc.Logger = logger
	mc.LogOutput = nil
	sc.MemberlistConfig = mc
	a.pushPull = mc.PushPullInterval
	a.leftGrace = max(2*time.Second, 5*mc.ProbeInterval)
	if cfg.Profile == ProfileLocal {
		sc.ReapInterval = time.Second
		sc.ReconnectInterval = 2 * time.Second
		sc.LeavePropagateDelay = 100 * time.Millisecond
		sc.BroadcastTimeout = 2 * time.Second
		// Queries (key rotation) wait GossipInterval*mult*log10(n+1):
		// keep them at about 3 s despite the faster gossip.
		sc.QueryTimeoutMult = 60
	}

	a.snapshotPeers = snapshotPeers(cfg.SnapshotPath, cfg.NodeID) // before serf rewrites it
	s, err := serf.Create(sc)
	if err != nil {
		_ = tr.Shutdown()
		return nil, fmt.Errorf("membership: start gossip on %s: %w", net.JoinHostPort(cfg.BindAddr, strconv.Itoa(cfg.BindPort)), err)
	}
	a.serf = s
	lm := s.LocalMember()
	a.mu.Lock()
	a.self = net.JoinHostPort(lm.Addr.String(), strconv.Itoa(int(lm.Port)))
	a.mu.Unlock()

	a.wg.Add(1)
	go a.drain()

	if len(cfg.Seeds) > 0 {
		if err := a.join(); err != nil {
			a.stopLoops()
			_ = s.Shutdown()
			return nil, err
		}
	}
	a.log.Info("membership: gossip started", "addr", a.self, "seeds", cfg.Seeds, "encrypted", kr != nil, "profile", cfg.Profile)

	a.wg.Add(1)
	go a.reconcileLoop()
	a.kick()
	return a, nil
}

// SetVoters attaches the consensus layer once it is running.
func (a *Agent) SetVoters(v Voters) {
	a.mu.Lock()
	a.voters = v
	a.mu.Unlock()
	a.kick()
}

// Addr is the advertised gossip address (host:port) other nodes can use as a
// seed.
func (a *Agent) Addr() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.self
}

// NodeID is this node's ID.
func (a *Agent) NodeID() string { return a.cfg.NodeID }

// Leave announces a graceful departure (the leader then removes this node
// from the raft configuration) and stops the agent.
func (a *Agent) Leave() error {
	err := a.serf.Leave()
	if err != nil {
		err = fmt.Errorf("membership: leave: %w", err)
	}
	return errors.Join(err, a.Shutdown())
}

// Shutdown stops the agent without announcing a departure: the others see
// this node as failed.
func (a *Agent) Shutdown() error {
	a.stopLoops()
	if err := a.serf.Shutdown(); err != nil {
		return fmt.Errorf("membership: shutdown: %w", err)
	}
	return nil
}

func (a *Agent) stopLoops() {
	a.mu.Lock()
	if a.stopped {
		a.mu.Unlock()
		return
	}
	a.stopped = true
	a.mu.Unlock()
	close(a.stop)
	a.wg.Wait()
}

func (a *Agent) kick() {
	select {
	case a.trigger <- struct{}{}:
	default:
	}
}

// drain empties serf's event channel promptly (serf stalls gossip while it
// is full) and hands member changes to the reconciler.
func (a *Agent) drain() {
	defer a.wg.Done()
	for {
		select {
		case <-a.stop:
			return
		case <-a.serf.ShutdownCh():
			a.mu.Lock()
			stopped := a.stopped
			a.mu.Unlock()
			if !stopped {
				a.log.Error("membership: gossip stopped unexpectedly")
				a.mu.Lock()
				a.lastError = "gossip stopped unexpectedly"
				a.mu.Unlock()
			}
			<-a.stop
			return
		case e := <-a.events:
			me, ok := e.(serf.MemberEvent)
			if !ok {
				continue // user events and queries are not used
			}
			a.mu.Lock()
			for _, m := range me.Members {
				if me.Type == serf.EventMemberReap {
					delete(a.known, m.Name)
				} else {
					a.known[m.Name] = m
				}
			}
			a.mu.Unlock()
			for _, m := range me.Members {
				a.log.Info("membership: gossip "+memberEventName(me.Type), "member", m.Name, "addr", net.JoinHostPort(m.Addr.String(), strconv.Itoa(int(m.Port))))
			}
			a.kick()
		}
	}
}

func memberEventName(t serf.EventType) string {
	switch t {
	case serf.EventMemberJoin:
		return "join"
	case serf.EventMemberLeave:
		return "leave"
	case serf.EventMemberFailed:
		return "failed"
	case serf.EventMemberUpdate:
		return "update"
	case serf.EventMemberReap:
		return "reap"
	}
	return t.String()
}

func gossipStatus(s serf.MemberStatus) string {
	switch s {
	case serf.StatusAlive:
		return GossipAlive
	case serf.StatusLeaving:
		return GossipLeaving
	case serf.StatusLeft:
		return GossipLeft
	case serf.StatusFailed:
		return GossipFailed
	}
	return GossipUnknown
}

func (a *Agent) gossip() []gossipMember {
	ms := a.serf.Members()
	out := make([]gossipMember, 0, len(ms))
	for _, m := range ms {
		out = append(out, gossipMember{
			Name:   m.Name,
			Addr:   net.JoinHostPort(m.Addr.String(), strconv.Itoa(int(m.Port))),
			Status: gossipStatus(m.Status),
			Tags:   m.Tags,
		})
	}
	return out
}

// SetFingerprint announces a new schema fingerprint (after a configuration
// upgrade activated) and makes it the one other nodes are checked against.
func (a *Agent) SetFingerprint(fp string) error {
	if fp == "" {
		return fmt.Errorf("membership: fingerprint is empty")
	}
	a.mu.Lock()
	cfg := a.cfg
	cfg.Fingerprint = fp
	tags := cfg.tags()
	a.mu.Unlock()
	if err := checkTagSize(tags); err != nil {
		return err
	}
	if err := a.serf.SetTags(tags); err != nil {
		return fmt.Errorf("membership: announce fingerprint: %w", err)
	}
	a.mu.Lock()
	a.cfg.Fingerprint = fp
	a.mu.Unlock()
	a.kick()
	return nil
}

func (a *Agent) policy() policy {
	a.mu.Lock()
	fp := a.cfg.Fingerprint
	a.mu.Unlock()
	return policy{
		self:        a.cfg.NodeID,
		fingerprint: fp,
		compatible:  a.cfg.Compatible,
		admit:       a.cfg.Admit,
		grace:       a.cfg.FailedGrace,
		// Long enough for several anti-entropy rounds to bring news of a
		// member whose broadcasts this node missed.
		unknownGrace:  a.cfg.FailedGrace + 3*a.pushPull,
		leftGrace:     a.leftGrace,
		promoteLag:    a.cfg.PromoteLag,
		maxVoters:     a.cfg.MaxVoters,
		manualPromote: a.cfg.ManualPromote,
	}
}

func (a *Agent) reconcileLoop() {
	defer a.wg.Done()
	t := time.NewTicker(a.cfg.ReconcileInterval)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-a.trigger:
		case <-t.C:
		}
		// Apply changes one at a time until there is nothing left to do.
		for i := 0; i < 16; i++ {
			if !a.reconcileOnce() {
				break
			}
			select {
			case <-a.stop:
				return
			default:
			}
		}
	}
}

// reconcileOnce refreshes the refusal list and, on the leader, makes at most
// one configuration change. It reports whether a change was made.
func (a *Agent) reconcileOnce() bool {
	p := a.policy()
	now := time.Now()
	gossip := a.gossip()
	a.mu.Lock()
	v := a.voters
	a.mu.Unlock()
	if v == nil {
		a.updateRefused(p, now, nil, nil, nil)
		return false
	}
	members := v.Members()
	admitted := false
	for _, m := range members {
		if m.ID == p.self {
			admitted = true
		}
	}
	if !admitted {
		// A node outside the configuration cannot judge others (it would
		// report the cluster itself as incompatible); it only waits.
		a.updateRefused(p, now, nil, nil, nil)
		a.mu.Lock()
		a.waiting = "this node is not in the raft configuration yet: waiting for the leader to admit it"
		a.mu.Unlock()
		return false
	}
	refused := a.updateRefused(p, now, gossip, members, v)
	if !v.IsLeader() {
		a.mu.Lock()
		clear(a.failedSince)
		a.waiting = ""
		a.mu.Unlock()
		return false
	}
	a.mu.Lock()
	updateFailedSince(p.self, now, gossip, members, a.failedSince)
	failedSince := make(map[string]time.Time, len(a.failedSince))
	for k, t := range a.failedSince {
		failedSince[k] = t
	}
	a.mu.Unlock()

	act, note := decide(p, now, gossip, members, commitIndex(v, members), failedSince, refused)
	a.mu.Lock()
	a.waiting = note
	a.mu.Unlock()
	if act.kind == actNone {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.ChangeTimeout)
	defer cancel()
	go func() {
		select {
		case <-a.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	var err error
	switch act.kind {
	case actAddLearner:
		if iv, ok := v.(IncarnationVoters); ok && act.inc != 0 {
			err = iv.AddLearnerIncarnation(ctx, act.id, act.raftAddr, act.inc)
		} else {
			err = v.AddLearner(ctx, act.id, act.raftAddr)
		}
	case actPromote:
		if pv, ok := v.(PeerVerifier); ok {
			err = pv.VerifyPeer(ctx, act.id, memberAddr(members, act.id))
		}
		if err == nil {
			err = v.Promote(ctx, act.id)
		}
	case actRemove:
		err = v.Remove(ctx, act.id)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.lastError = fmt.Sprintf("%s %s: %v", act.kind, act.id, err)
		a.log.Warn("membership: configuration change failed", "action", act.kind.String(), "member", act.id, "reason", act.reason, "err", err)
		return false
	}
	a.lastChange = act.String()
	a.lastError = ""
	if act.kind == actRemove {
		delete(a.failedSince, act.id)
	}
	a.log.Info("membership: configuration changed", "action", act.kind.String(), "member", act.id, "reason", act.reason)
	return true
}

// updateRefused recomputes the refusal list, logging each new refusal once.
// On the leader, with v a PeerVerifier, candidates are also refused until
// their peer credentials verify.
func (a *Agent) updateRefused(p policy, now time.Time, gossip []gossipMember, members []kv.Member, v Voters) map[string]string {
	reasons := refusals(p, gossip, members)
	if v != nil && v.IsLeader() {
		for id, r := range a.checkPeers(v, p, now, gossip, members, reasons) {
			reasons[id] = r
		}
	}
	byName := make(map[string]gossipMember, len(gossip))
	for _, g := range gossip {
		byName[g.Name] = g
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, reason := range reasons {
		old, had := a.refused[id]
		if had && old.Reason == reason {
			continue
		}
		g := byName[id]
		r := Refusal{ID: id, Addr: g.Addr, RaftAddr: g.Tags[TagRaftAddr], Fingerprint: g.Tags[TagFingerprint], Reason: reason, Since: now}
		a.refused[id] = r
		a.log.Warn("membership: node refused", "member", id, "addr", r.Addr, "reason", reason)
	}
	for id := range a.refused {
		if _, still := reasons[id]; !still {
			delete(a.refused, id)
		}
	}
	for addr, r := range a.dupRefused {
		if now.Sub(r.Since) > 10*time.Minute {
			delete(a.dupRefused, addr)
		}
	}
	return reasons
}

// Refused lists nodes that gossip with the cluster but are not admitted,
// with the reason, sorted by ID.
func (a *Agent) Refused() []Refusal {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]Refusal, 0, len(a.refused)+len(a.dupRefused))
	for _, r := range a.refused {
		out = append(out, r)
	}
	for _, r := range a.dupRefused {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ID != out[j].ID {
			return out[i].ID < out[j].ID
		}
		return out[i].Addr < out[j].Addr
	})
	return out
}

// mergeDelegate refuses a node whose ID is already used by a live member at
// another address, on both sides of a join.
type mergeDelegate struct{ a *Agent }

func (d *mergeDelegate) NotifyMerge(members []*serf.Member) error {
	a := d.a
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, m := range members {
		if m == nil || m.Status == serf.StatusLeft {
			continue
		}
		addr := net.JoinHostPort(m.Addr.String(), strconv.Itoa(int(m.Port)))
		if m.Name == a.cfg.NodeID && a.self != "" && addr != a.self {
			// Either we are joining and the cluster already has a live
			// member with our ID, or a newcomer claims our ID.
			err := fmt.Errorf("%w: %q is used by the members at %s and %s: give every node a unique node_id", ErrDuplicateID, m.Name, a.self, addr)
			if a.joinDup == nil {
				a.joinDup = err
			}
			if _, seen := a.dupRefused[addr]; !seen {
				a.log.Warn("membership: node refused", "member", m.Name, "addr", addr, "reason", "duplicate node id, already used by "+a.self)
			}
			a.dupRefused[addr] = Refusal{ID: m.Name, Addr: addr, RaftAddr: m.Tags[TagRaftAddr], Fingerprint: m.Tags[TagFingerprint],
				Reason: "duplicate node id: already used by the member at " + a.self, Since: time.Now()}
			return err
		}
		if k, ok := a.known[m.Name]; ok && (k.Status == serf.StatusAlive || k.Status == serf.StatusLeaving) {
			kaddr := net.JoinHostPort(k.Addr.String(), strconv.Itoa(int(k.Port)))
			if kaddr != addr {
				if _, seen := a.dupRefused[addr]; !seen {
					a.log.Warn("membership: node refused", "member", m.Name, "addr", addr, "reason", "duplicate node id, already used by "+kaddr)
				}
				a.dupRefused[addr] = Refusal{ID: m.Name, Addr: addr, RaftAddr: m.Tags[TagRaftAddr], Fingerprint: m.Tags[TagFingerprint],
					Reason: "duplicate node id: already used by the member at " + kaddr, Since: time.Now()}
				return fmt.Errorf("%w: %q at %s is already used by the member at %s", ErrDuplicateID, m.Name, addr, kaddr)
			}
		}
	}
	return nil
}

// logWriter turns serf/memberlist's "[LEVEL] text" lines into slog records.
type logWriter struct{ a *Agent }

func (w *logWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		s := string(line)
		level := slog.LevelInfo
		switch {
		case strings.Contains(s, "[DEBUG]"):
			continue
		case strings.Contains(s, "[ERR]"):
			level = slog.LevelError
		case strings.Contains(s, "[WARN]"):
			level = slog.LevelWarn
		}
		// the level is the record's; the tag is not repeated in the message
		for _, tag := range []string{"[INFO] ", "[WARN] ", "[ERR] ", "[ERROR] "} {
			if i := strings.Index(s, tag); i >= 0 {
				s = s[:i] + s[i+len(tag):]
				break
			}
		}
		w.a.log.Log(context.Background(), level, "membership: gossip: "+s)
	}
	return len(p), nil
}
