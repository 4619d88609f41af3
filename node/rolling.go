package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/membership"
	"github.com/writ-dev/writ/schema/compat"
	"github.com/writ-dev/writ/schema/ir"
)

// Rolling schema upgrades (docs/schema.md, "Rolling upgrades").
//
// Nodes of one cluster may run different schemas while an upgrade rolls
// through them. Three rules keep every replica able to apply every entry:
//
//  1. Admission: a node (new, or a member restarted with another schema)
//     is judged against the effective schema of the rest of the raft
//     configuration — the types all of them declare (compat.Effective) —
//     by compat.Check, the rule of `writ schema diff`: any BLOCKED change
//     refuses it, naming the finding code and the fix.
//  2. Ingress: a node accepts an entry of a type of its schema only while
//     every member of the configuration it knows runs a schema declaring
//     it (gate); otherwise the entry is REJECTED before it is proposed.
//  3. Restart in place: a node refuses to start on a schema that is
//     BLOCKED-incompatible with the schema it ran last (checkLocal), since
//     its log may hold entries only that schema declares.
//
// Once every member runs v2 a v1 node is refused by rule 1 (a type v2
// added may be in the log), so a member without a type can never receive
// an entry of it: an entry of a type some replica cannot decode is never
// proposed.

// schemaFile keeps the schema this node last ran (rule 3).
const schemaFile = "schema-model.json"

// fetchTimeout bounds one Schema RPC to another node.
const fetchTimeout = 2 * time.Second

// gateTTL is how long the ingress view of the members' schemas is reused.
const gateTTL = 250 * time.Millisecond

type schemas struct {
	ownFP string
	own   *ir.Schema
	model []byte
	view  func() membership.View // nil until membership started

	mu      sync.Mutex
	byFP    map[string]*ir.Schema
	lastFP  map[string]string // member ID → fingerprint it last announced
	verdict map[string]string // candidate fp + peer fps → refusal ("" admitted)

	ownTypes map[string]bool
	gateSt   atomic.Pointer[gateState]
	refresh  sync.Mutex // held while one caller recomputes gateSt
}

func newSchemas(cat ir.Catalog) (*schemas, error) {
	s := &schemas{ownFP: cat.Fingerprint(), own: cat.Schema(), byFP: map[string]*ir.Schema{}, lastFP: map[string]string{}, verdict: map[string]string{}}
	if s.own == nil {
		return nil, errors.New("node: the catalog has no schema model")
	}
	b, err := compat.Encode(s.own)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	s.model = b
	s.byFP[s.ownFP] = s.own
	s.ownTypes = make(map[string]bool, len(s.own.Entries))
	for _, e := range s.own.Entries {
		s.ownTypes[e.Name] = true
	}
	return s, nil
}

// setView gives the ingress gate the membership view.
func (s *schemas) setView(v func() membership.View) {
	s.mu.Lock()
	s.view = v
	s.mu.Unlock()
}

// serve answers the Schema RPC.
func (s *schemas) serve() (string, []byte) { return s.ownFP, s.model }

type savedSchema struct {
	Fingerprint string          `json:"fingerprint"`
	Model       json.RawMessage `json:"model"`
}

// checkLocal is rule 3: a start on a schema BLOCKED-incompatible with the
// one this data directory last ran fails. recordLocal records the schema
// once the node has started.
func (s *schemas) checkLocal(dataDir string) error {
	p := filepath.Join(dataDir, schemaFile)
	b, err := os.ReadFile(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return startErr("data_dir %s: %v", dataDir, err)
	default:
		var last savedSchema
		if err := json.Unmarshal(b, &last); err != nil {
			return startErr("data_dir %s: %s does not parse (%v): restore it or delete it", dataDir, schemaFile, err)
		}
		if last.Fingerprint != s.ownFP {
			old, err := compat.Decode(last.Model, last.Fingerprint)
			if err != nil {
				return startErr("data_dir %s: %s: %v: restore it or delete it", dataDir, schemaFile, err)
			}
			if err := compat.Check(old, s.own); err != nil {
				return startErr("schema: this node last ran schema %s and its log may hold entries only that schema declares: %v: restart it with that schema (--schema), or empty data_dir so that it joins as a new node", short(last.Fingerprint), err)
			}
		}
	}
	return nil
}

// recordLocal records the schema this data directory runs (rule 3).
func (s *schemas) recordLocal(dataDir string) error {
	out, _ := json.Marshal(savedSchema{Fingerprint: s.ownFP, Model: s.model})
	if err := writeFileSync(filepath.Join(dataDir, schemaFile), out); err != nil {
		return startErr("data_dir %s: %v", dataDir, err)
	}
	return nil
}

// modelOf returns the schema with fingerprint fp, asking the node at
// apiAddr for it the first time.
func (s *schemas) modelOf(fp, apiAddr string) (*ir.Schema, error) {
	s.mu.Lock()
	m, ok := s.byFP[fp]
	s.mu.Unlock()
	if ok {
		return m, nil
	}
	if apiAddr == "" {
		return nil, fmt.Errorf("schema %s is unknown here and the node announces no API address", short(fp))
	}
	c, err := grpc.NewClient(apiAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("read schema %s from %s: %w", short(fp), apiAddr, err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	defer cancel()
	r, err := writv1.NewWritClient(c).Schema(ctx, &writv1.SchemaRequest{})
	if err != nil {
		return nil, fmt.Errorf("read schema %s from %s: %w", short(fp), apiAddr, err)
	}
	if r.SchemaFingerprint != fp {
		return nil, fmt.Errorf("node at %s now runs schema %s, not the announced %s", apiAddr, short(r.SchemaFingerprint), short(fp))
	}
	m, err = compat.Decode(r.Model, fp)
	if err != nil {
		return nil, fmt.Errorf("node at %s: %w", apiAddr, err)
	}
	s.mu.Lock()
	s.byFP[fp] = m
	s.mu.Unlock()
	return m, nil
}

// peerFPs resolves each peer's fingerprint (the last one it announced when
// gossip does not know it now); peers never seen are left out.
func (s *schemas) peerFPs(peers []membership.Peer) []membership.Peer {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]membership.Peer, 0, len(peers))
	for _, p := range peers {
		if p.Fingerprint != "" {
			s.lastFP[p.ID] = p.Fingerprint
		} else if p.Fingerprint = s.lastFP[p.ID]; p.Fingerprint == "" {
			continue
		}
		out = append(out, p)
	}
	return out
}

// effective is compat.Effective of the peers' schemas.
func (s *schemas) effective(peers []membership.Peer) (*ir.Schema, error) {
	var ms []*ir.Schema
	seen := map[string]bool{}
	for _, p := range peers {
		if seen[p.Fingerprint] {
			continue
		}
		seen[p.Fingerprint] = true
		m, err := s.modelOf(p.Fingerprint, p.APIAddr)
		if err != nil {
			return nil, fmt.Errorf("member %s: %w", p.ID, err)
		}
		ms = append(ms, m)
	}
	return compat.Effective(ms...), nil
}

// admit is rule 1 (membership.Config.Admit).
func (s *schemas) admit(c membership.Candidate, peers []membership.Peer) error {
	if c.Fingerprint == "" {
		return errors.New("the node announces no schema fingerprint")
	}
	peers = s.peerFPs(peers)
	if len(peers) == 0 {
		return nil
	}
	fps := make([]string, 0, len(peers))
	for _, p := range peers {
		fps = append(fps, p.Fingerprint)
	}
	sort.Strings(fps)
	if fps[0] == c.Fingerprint && fps[len(fps)-1] == c.Fingerprint {
		return nil
	}
	key := c.Fingerprint + "|" + strings.Join(fps, ",")
	s.mu.Lock()
	v, ok := s.verdict[key]
	s.mu.Unlock()
	if ok {
		if v == "" {
			return nil
		}
		return errors.New(v)
	}
	eff, err := s.effective(peers)
	if err != nil {
		return fmt.Errorf("cannot judge schema %s yet: %w", short(c.Fingerprint), err)
	}
	cand, err := s.modelOf(c.Fingerprint, c.APIAddr)
	if err != nil {
		return fmt.Errorf("cannot judge schema %s yet: %w", short(c.Fingerprint), err)
	}
	v = ""
	if err := compat.Check(eff, cand); err != nil {
		v = fmt.Sprintf("schema %s cannot run beside the cluster's: %v", short(c.Fingerprint), err)
	}
	s.mu.Lock()
	s.verdict[key] = v
	s.mu.Unlock()
	if v == "" {
		return nil
	}
	return errors.New(v)
}

// gate is rule 2: "" when an entry of type typ may be written now, else
// why not. Types outside this node's schema model (the built-in
// cluster.config, undeclared types) are left to the pipeline. It runs on
// every request: in a cluster on one schema it is a map lookup and an
// atomic load.
func (s *schemas) gate(typ string) string {
	if s == nil || !s.ownTypes[typ] {
		return ""
	}
	g := s.gateView()
	if g.eff == nil || compat.Declares(g.eff, typ) {
		return ""
	}
	return fmt.Sprintf("entry type %q is not active in the cluster yet: %s; submit it once every member runs a schema that declares it (rolling upgrade in progress, see `writctl members`)", typ, g.why)
}

// gateState is the ingress view of the members' schemas.
type gateState struct {
	at  time.Time
	eff *ir.Schema // nil: every member runs this node's schema
	why string     // why eff is smaller, for the rejection
}

// gateView returns the effective schema of all members (this node
// included); it is recomputed at most every gateTTL, by one caller at a
// time (the others use the previous view meanwhile).
func (s *schemas) gateView() *gateState {
	g := s.gateSt.Load()
	if g != nil && time.Since(g.at) < gateTTL {
		return g
	}
	if !s.refresh.TryLock() {
		if g == nil {
			return &gateState{}
		}
		return g
	}
	defer s.refresh.Unlock()
	s.mu.Lock()
	view := s.view
	s.mu.Unlock()
	if view == nil {
		return &gateState{}
	}
	next := s.computeGate(view(), g)
	s.gateSt.Store(next)
	return next
}

func (s *schemas) computeGate(v membership.View, prev *gateState) *gateState {
	var peers []membership.Peer
	for _, m := range v.Members {
		if m.Raft == membership.RaftNone || m.ID == v.Self {
			continue
		}
		peers = append(peers, membership.Peer{ID: m.ID, Fingerprint: m.Tags[membership.TagFingerprint], APIAddr: m.Tags[membership.TagAPIAddr]})
	}
	peers = s.peerFPs(peers)
	var others []string
	for _, p := range peers {
		if p.Fingerprint != s.ownFP {
			others = append(others, p.ID+" runs "+short(p.Fingerprint))
		}
	}
	now := time.Now()
	if len(others) == 0 {
		return &gateState{at: now}
	}
	eff, err := s.effective(append(peers, membership.Peer{ID: v.Self, Fingerprint: s.ownFP}))
	if err != nil {
		if prev != nil {
			// A member announcing a schema whose model it does not serve
			// yet (it gossips before its API is up) passed rule 3 against
			// the schema it ran before, so it declares every type it
			// declared then: the previous view is still safe. Try again
			// after gateTTL.
			return &gateState{at: now, eff: prev.eff, why: prev.why}
		}
		return &gateState{at: now, eff: &ir.Schema{}, why: "the schemas of the other members are not known yet (" + err.Error() + ")"}
	}
	return &gateState{at: now, eff: eff, why: strings.Join(others, ", ") + ", which does not declare it"}
}

func short(fp string) string {
	if i := strings.IndexByte(fp, ':'); i >= 0 && len(fp) > i+13 {
		return fp[:i+13]
	}
	return fp
}

// writeFileSync writes a file atomically (write, fsync, rename).
func writeFileSync(p string, b []byte) error {
	tmp := p + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// refusalPoll is how often a node outside the raft configuration asks a
// member why it is not admitted.
const refusalPoll = time.Second

// watchRefusal logs, on a node the cluster has not admitted, why the
// members refuse it (once per distinct reason), so the refusal is in the
// refused node's log as well as in the leader's.
func (n *Node) watchRefusal() {
	t := time.NewTicker(refusalPoll)
	defer t.Stop()
	last := ""
	for {
		select {
		case <-n.done:
			return
		case <-t.C:
		}
		admitted := false
		for _, m := range n.rs.Members() {
			admitted = admitted || m.ID == n.cfg.NodeID
		}
		if admitted {
			last = ""
			continue
		}
		reason, from := n.askRefusal()
		if reason != "" && reason != last {
			n.log.Warn("writd: the cluster refuses this node", "reason", reason, "reported_by", from)
		}
		last = reason
	}
}

// askRefusal asks the first member that answers why it refuses this node.
func (n *Node) askRefusal() (reason, from string) {
	for _, m := range n.mem.View().Members {
		addr := m.Tags[membership.TagAPIAddr]
		if m.ID == n.cfg.NodeID || addr == "" || m.Gossip != membership.GossipAlive {
			continue
		}
		r, err := remoteMembers(addr)
		if err != nil {
			continue
		}
		for _, x := range r.Refused {
			if x.Id == n.cfg.NodeID {
				return x.Reason, m.ID
			}
		}
		return "", m.ID
	}
	return "", ""
}

func remoteMembers(addr string) (*writv1.MembersResponse, error) {
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	defer cancel()
	return writv1.NewWritClient(c).Members(ctx, &writv1.MembersRequest{})
}
