package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/schema/ir"
)

// Scenario payloads are drawn from the schema: instance identifiers come
// from a pool private to the scenario, so that requests create instances
// the later entries address.

// drawSetup returns request entries that create instances named from
// pool, each creation twice (dependencies resolve in either order).
func (e *Env) drawSetup(seed uint64, pool string) []drawnEntry {
	return e.drawSetupSized(seed, pool, maxOff)
}

// drawSetupSized is drawSetup with every bounded string and list at its
// maximum size (mode maxNarrow or maxWide), or sized as usual (maxOff).
func (e *Env) drawSetupSized(seed uint64, pool string, mode maxMode) []drawnEntry {
	d := newDrawer(e.Schema, e.Opts.Seed, seed)
	d.pool = []string{pool}
	d.maxOut = mode
	var out []drawnEntry
	for round := 0; round < 2; round++ {
		for _, en := range e.entries() {
			if en.Class != ir.ClassRequest || en.Machine == "" {
				continue
			}
			m, _ := e.Schema.Machine(en.Machine)
			for try := 0; try < 40; try++ {
				obj := d.object(en.Fields)
				data, _ := json.Marshal(obj)
				if e.Load.CheckPayloadJSON(en.Name, data) != nil {
					continue
				}
				if tgt := targetOfJSON(en, obj); m != nil && m.IsInitial(tgt) {
					id := fmt.Sprintf("%s-%s-%d", pool, en.Name, round)
					if mode != maxOff {
						id += fmt.Sprintf("-max%d", mode)
					}
					out = append(out, drawnEntry{typ: en.Name, class: en.Class, id: id, data: data})
					break
				}
			}
		}
	}
	return out
}

func targetOfJSON(en *ir.Entry, obj map[string]any) string {
	if en.ToState != "" {
		return en.ToState
	}
	v, _ := obj[en.To].(string)
	if en.ToMap != nil {
		return en.ToMap[v]
	}
	return v
}

// drawFacts returns n valid facts about pool instances, with unique IDs.
func (e *Env) drawFacts(seed uint64, pool string, n int) []drawnEntry {
	d := newDrawer(e.Schema, e.Opts.Seed, seed)
	d.pool = []string{pool}
	var types []*ir.Entry
	for _, en := range e.entries() {
		if en.Class == ir.ClassFact && en.ID != "" {
			types = append(types, en)
		}
	}
	var out []drawnEntry
	for i := 0; len(out) < n && i < n*40 && len(types) > 0; i++ {
		en := types[i%len(types)]
		obj := d.object(en.Fields)
		id := fmt.Sprintf("%s-f%d", pool, len(out))
		obj[en.ID] = id
		if en.Order != "" {
			obj[en.Order] = jsonNumber(fmt.Sprint(len(out) + 1))
		}
		data, _ := json.Marshal(obj)
		if e.Load.CheckPayloadJSON(en.Name, data) != nil {
			continue
		}
		out = append(out, drawnEntry{typ: en.Name, class: en.Class, id: id, data: data})
	}
	return out
}

// runRequests submits entries to n and returns the COMMITTED responses.
func (c *cluster) runRequests(ctx context.Context, n *node, es []drawnEntry) []*writv1.SubmitResponse {
	var out []*writv1.SubmitResponse
	for _, de := range es {
		r, _, err := submit(ctx, n, de.id, de.typ, string(de.data), 5*time.Second)
		if err == nil && r.Outcome == writv1.Outcome_COMMITTED {
			out = append(out, r)
		}
	}
	return out
}

func scReplyAfterCommit(ctx context.Context, e *Env, c *cluster) Outcome {
	setup := e.drawSetup(101, "w1a")
	// Then the largest payloads the schema allows, in runes and in bytes:
	// every replica must apply them.
	// Same identifiers as above, so that what they depend on exists.
	setup = append(setup, e.drawSetupSized(102, "w1a", maxNarrow)...)
	setup = append(setup, e.drawSetupSized(103, "w1a", maxWide)...)
	// Submit through a follower too: the reply then crosses forwarding.
	for i, de := range setup {
		n := c.nodes[i%len(c.nodes)]
		r, _, err := submit(ctx, n, de.id, de.typ, string(de.data), 5*time.Second)
		if err != nil || r.Outcome != writv1.Outcome_COMMITTED {
			continue
		}
		c.out.Cases++
		// The replying node (served_by, or the node asked) must have
		// applied the index before it replied.
		replier := n
		for _, x := range c.nodes {
			if x.Name == r.ServedBy {
				replier = x
			}
		}
		st, err := c.status(ctx, replier)
		if err != nil {
			return c.harnessBroke(err)
		}
		if st.Applied < r.Index {
			c.fail(de.typ, "reply only after commit and apply on the replying node (W1)",
				"request %s answered COMMITTED at index %d by %s, whose applied index right after the reply was %d", de.id, r.Index, replier.Name, st.Applied)
		}
		// A majority must have the entry: at least one other node reaches
		// the index.
		if err := c.converge(ctx, 20*time.Second); err != nil {
			c.fail(de.typ, "a committed entry must reach every live replica", "%v", err)
		}
	}
	// Every node is still serving: a valid entry that no replica can apply
	// stops them all.
	c.checkAlive()
	if c.out.Cases == 0 && len(c.out.Findings) == 0 {
		return notRun("no drawn request was COMMITTED by the cluster (the handler refused every drawn creation)")
	}
	return c.out
}

func scQuorumLossRequest(ctx context.Context, e *Env, c *cluster) Outcome {
	s := c.nodes[0]
	c.runRequests(ctx, s, e.drawSetup(201, "w2a"))
	c.kill(c.nodes[1])
	c.kill(c.nodes[2])
	reqs := e.drawSetup(202, "w2b")
	for _, de := range reqs {
		r, od, err := submit(ctx, s, de.id, de.typ, string(de.data), time.Second)
		c.out.Cases++
		switch {
		case err == nil && r.Outcome == writv1.Outcome_COMMITTED:
			c.fail(de.typ, "a request without quorum must get UNAVAILABLE or UNCERTAIN (W2)",
				"request %s was answered COMMITTED with 2 of 3 nodes down", de.id)
		case err != nil && od == nil && status.Code(err) == codes.DeadlineExceeded:
			// Not a success, and a deadline means "unknown" to any gRPC
			// client; but the node should have said UNCERTAIN itself.
			c.out.Findings = append(c.out.Findings, Finding{Code: CodeClusterScenario, Status: ir.StatusReviewRequired,
				Subject: c.sc + ": " + de.typ,
				Message: fmt.Sprintf("request %s failed with a bare gRPC DeadlineExceeded and no outcome detail (treated as UNCERTAIN): %v", de.id, err),
				Fix:     "answer with an UNAVAILABLE or UNCERTAIN outcome before the client's deadline (e.g. when forwarding to an unreachable leader)"})
		case err != nil && od == nil:
			c.fail(de.typ, "every failed request must carry a definite outcome (REJECTED, UNAVAILABLE or UNCERTAIN)",
				"request %s failed without an outcome: %v", de.id, err)
		case od != nil && od.Outcome == writv1.Outcome_COMMITTED:
			c.fail(de.typ, "an error reply must never say COMMITTED", "request %s: error reply with outcome COMMITTED", de.id)
		}
	}
	if err := c.healthy(ctx); err != nil {
		return c.harnessBroke(err)
	}
	// After heal every request's outcome is queryable by its ID (UNCERTAIN
	// ones may have committed; UNAVAILABLE ones must not have).
	for _, de := range reqs {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		o, err := s.Client().Outcome(cctx, &writv1.OutcomeRequest{RequestId: de.id})
		cancel()
		if err != nil {
			c.fail(de.typ, "outcomes must be queryable by request ID after heal", "outcome of %s: %v", de.id, err)
			continue
		}
		_ = o
	}
	return c.out
}

func (c *cluster) waitDrained(ctx context.Context, n *node, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		depth, err := outboxDepth(ctx, n)
		if err == nil && depth == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("outbox of %s not drained within %s (depth %d, err %v)", n.Name, d, depth, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// appliedIndex is a node's applied index (the watch position to start from).
func (c *cluster) appliedIndex(ctx context.Context, n *node) uint64 {
	st, err := c.status(ctx, n)
	if err != nil {
		return 1
	}
	return st.Applied + 1
}

func scFactsQuorumLoss(ctx context.Context, e *Env, c *cluster) Outcome {
	s := c.nodes[0]
	c.runRequests(ctx, s, e.drawSetup(301, "w3a"))
	from := c.appliedIndex(ctx, s)
	facts := e.drawFacts(302, "w3a", 8)
	if len(facts) == 0 {
		return notRun("the schema has no fact type with an idempotency key to report")
	}
	c.kill(c.nodes[1])
	c.kill(c.nodes[2])
	for _, f := range facts {
		r, err := report(ctx, s, f.typ, string(f.data))
		c.out.Cases++
		if err != nil || !r.Received {
			c.fail(f.typ, "facts must be accepted while quorum is lost (W3)", "fact %s not received with 2 of 3 nodes down: %v", f.id, err)
		}
	}
	if depth, err := outboxDepth(ctx, s); err != nil || depth < uint64(len(facts)) {
		c.fail("outbox", "received facts stay in the outbox until committed", "outbox depth %d with quorum lost, want %d (%v)", depth, len(facts), err)
	}
	if err := c.healthy(ctx); err != nil {
		return c.harnessBroke(err)
	}
	if err := c.waitDrained(ctx, s, 40*time.Second); err != nil {
		c.fail("outbox", "facts must be committed after quorum returns without redelivery", "%v", err)
	}
	if err := c.converge(ctx, 30*time.Second); err != nil {
		c.fail("replicas", "replicas must converge", "%v", err)
	}
	c.checkFactsOnce(ctx, facts, from)
	return c.out
}

func scFactsRestart(ctx context.Context, e *Env, c *cluster) Outcome {
	s := c.nodes[1]
	c.runRequests(ctx, s, e.drawSetup(401, "w4a"))
	from := c.appliedIndex(ctx, c.nodes[0])
	facts := e.drawFacts(402, "w4a", 6)
	if len(facts) == 0 {
		return notRun("the schema has no fact type with an idempotency key to report")
	}
	c.kill(c.nodes[0])
	c.kill(c.nodes[2])
	for _, f := range facts {
		r, err := report(ctx, s, f.typ, string(f.data))
		c.out.Cases++
		if err != nil || !r.Received {
			c.fail(f.typ, "facts must be accepted while quorum is lost (W3)", "fact %s not received: %v", f.id, err)
		}
	}
	// The receiving node dies before anything could commit.
	c.kill(s)
	if err := c.healthy(ctx); err != nil {
		return c.harnessBroke(err)
	}
	if err := c.waitDrained(ctx, s, 40*time.Second); err != nil {
		c.fail("outbox", "received facts must survive a restart of the receiving node (W3, W10)", "%v", err)
	}
	if err := c.converge(ctx, 30*time.Second); err != nil {
		c.fail("replicas", "replicas must converge", "%v", err)
	}
	c.checkFactsOnce(ctx, facts, from)
	return c.out
}

func scReceiptWatch(ctx context.Context, e *Env, c *cluster) Outcome {
	var rec *ir.Entry
	for _, en := range e.entries() {
		if en.Class == ir.ClassReceipt {
			rec = en
			break
		}
	}
	if rec == nil {
		return notRun("the schema declares no receipt type")
	}
	s := c.nodes[2]
	c.runRequests(ctx, s, e.drawSetup(501, "w5a"))
	d := newDrawer(e.Schema, e.Opts.Seed, 502)
	d.pool = []string{"w5a"}
	for try := 0; try < 50; try++ {
		obj := d.object(rec.Fields)
		if rec.ID != "" {
			obj[rec.ID] = fmt.Sprintf("w5-r%d", try)
		}
		data, _ := json.Marshal(obj)
		if e.Load.CheckPayloadJSON(rec.Name, data) != nil {
			continue
		}
		from := c.appliedIndex(ctx, s)
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		r, err := s.Client().Deliver(cctx, &writv1.DeliverRequest{Entry: &writv1.Entry{Type: rec.Name, Payload: data}})
		cancel()
		c.out.Cases++
		if err != nil || !r.Received {
			c.fail(rec.Name, "a valid receipt must be acknowledged as received", "receipt not received: %v", err)
			return c.out
		}
		if len(r.ItemIds) == 0 {
			c.fail(rec.Name, "a receipt's acknowledgement must name its items for the watch stream", "no item IDs in the acknowledgement")
			return c.out
		}
		// Per-item outcomes arrive on watch. A receipt at its maximum
		// number of items takes a while to apply: wait as long as item
		// outcomes keep arriving, and fail once none arrived for 20s.
		const stall = 20 * time.Second
		deadline := time.Now().Add(stall)
		lastMissing := len(r.ItemIds) + 1
		for {
			evs, err := watchAll(ctx, s, from)
			if err != nil {
				return c.harnessBroke(err)
			}
			got := map[string]bool{}
			for _, ev := range evs {
				got[ev.Id] = true
			}
			missing := 0
			for _, id := range r.ItemIds {
				if !got[id] {
					missing++
				}
			}
			if missing == 0 {
				return c.out
			}
			if missing < lastMissing {
				lastMissing, deadline = missing, time.Now().Add(stall)
			}
			if time.Now().After(deadline) {
				c.fail(rec.Name, "every item's outcome must be delivered on the watch stream (W4)", "%d of %d items have no watch event, and none arrived for %s", missing, len(r.ItemIds), stall)
				return c.out
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	return notRun("could not draw a valid receipt payload")
}

func scLeaderKill(ctx context.Context, e *Env, c *cluster) Outcome {
	setup := e.drawSetup(701, "w7a")
	c.runRequests(ctx, c.nodes[0], setup[:len(setup)/2])
	var mu sync.Mutex
	committed := map[string]*writv1.SubmitResponse{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				es := e.drawSetup(uint64(7000+w*1000+i), fmt.Sprintf("w7-%d-%d", w, i))
				for _, de := range es {
					n := c.nodes[(w+i)%len(c.nodes)]
					r, _, err := submit(ctx, n, de.id, de.typ, string(de.data), 2*time.Second)
					if err == nil && r.Outcome == writv1.Outcome_COMMITTED {
						mu.Lock()
						committed[de.id] = r
						mu.Unlock()
					} else if err != nil {
						time.Sleep(20 * time.Millisecond)
					}
				}
			}
		}(w)
	}
	time.Sleep(1500 * time.Millisecond)
	old, err := c.leader(ctx, 10*time.Second)
	if err != nil {
		close(stop)
		wg.Wait()
		return c.harnessBroke(err)
	}
	c.kill(old)
	if _, err := c.leader(ctx, 20*time.Second); err != nil {
		c.fail("leader", "a new leader must be elected after the old one dies", "%v", err)
	}
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	wg.Wait()
	if err := c.healthy(ctx); err != nil {
		return c.harnessBroke(err)
	}
	if err := c.converge(ctx, 40*time.Second); err != nil {
		c.fail("replicas", "replicas must converge after a leader change", "%v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(committed) < 5 {
		return Outcome{NotRun: fmt.Sprintf("only %d requests committed under load: the load did not run", len(committed)), Findings: c.out.Findings}
	}
	for id := range committed {
		c.out.Cases++
		for _, n := range c.nodes {
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			o, err := n.Client().Outcome(cctx, &writv1.OutcomeRequest{RequestId: id})
			cancel()
			if err != nil || !o.Known || o.Outcome != writv1.Outcome_COMMITTED {
				c.fail(id, "no COMMITTED entry may be lost (W10)", "%s: request %s was answered COMMITTED but its outcome there is %v (%v)", n.Name, id, o, err)
			}
		}
	}
	return c.out
}

func scUndeclaredType(ctx context.Context, _ *Env, c *cluster) Outcome {
	const typ = "conformance.undeclared_type"
	n := c.nodes[0]
	r, od, err := submit(ctx, n, "w8-req", typ, `{"x":1}`, 2*time.Second)
	c.out.Cases++
	if err == nil || od == nil || od.Outcome != writv1.Outcome_REJECTED {
		c.fail(typ, "an undeclared type must be REJECTED at ingress (W6)", "submit of an undeclared type answered %v %v", r, err)
	}
	fr, err := report(ctx, n, typ, `{"x":1}`)
	c.out.Cases++
	if err == nil && fr.Received {
		c.fail(typ, "an undeclared type must never be retained as a fact (W6)", "report of an undeclared type was received into the outbox")
	}
	return c.out
}

// scCommitTimeout kills both followers and immediately submits to the
// leader, which still appends (it has not noticed the loss yet) but cannot
// commit: the reply must be UNCERTAIN (or UNAVAILABLE if the leader already
// stepped down), nothing the entry would write may be visible, and after
// heal the outcome is queryable and a retry with the same ID is safe.
func scCommitTimeout(ctx context.Context, e *Env, c *cluster) Outcome {
	if e.Catalog == nil {
		return notRun("no generated catalog is linked: the scenario needs the entries' keys")
	}
	lead, err := c.leader(ctx, 20*time.Second)
	if err != nil {
		return c.harnessBroke(err)
	}
	reqs := e.drawSetup(801, "w9a")
	c.runRequests(ctx, lead, reqs)
	// A creation of a fresh instance whose dependencies now exist.
	var de drawnEntry
	for _, x := range reqs {
		en, _ := e.Schema.Entry(x.typ)
		m, ok := e.Schema.Machine(en.Machine)
		if !ok {
			continue
		}
		var obj map[string]any
		if json.Unmarshal(x.data, &obj) != nil {
			continue
		}
		obj[m.Key] = "w9fresh"
		data, _ := json.Marshal(obj)
		if e.Load.CheckPayloadJSON(x.typ, data) == nil {
			de = drawnEntry{typ: x.typ, class: x.class, id: "w9-timeout", data: data}
			break
		}
	}
	if de.typ == "" {
		return notRun("no request type can create an instance")
	}
	td, _ := e.Catalog.Type(de.typ)
	p, err := td.ParseJSON(de.data)
	if err != nil {
		return c.harnessBroke(err)
	}
	var followers []*node
	for _, n := range c.nodes {
		if n != lead {
			followers = append(followers, n)
		}
	}
	for _, n := range followers {
		c.kill(n)
	}
	r, od, err := submit(ctx, lead, de.id, de.typ, string(de.data), 400*time.Millisecond)
	c.out.Cases++
	uncertain := false
	switch {
	case err == nil && r.Outcome == writv1.Outcome_COMMITTED:
		c.fail(de.typ, "a request that cannot commit must not be COMMITTED (W2)", "request %s COMMITTED with both followers dead", de.id)
	case od != nil && od.Outcome == writv1.Outcome_UNCERTAIN:
		uncertain = true
	case od != nil && (od.Outcome == writv1.Outcome_UNAVAILABLE || od.Outcome == writv1.Outcome_REJECTED):
	case err != nil && status.Code(err) == codes.DeadlineExceeded:
		uncertain = true
	default:
		c.fail(de.typ, "a failed request must carry a definite outcome", "request %s: %v %v", de.id, r, err)
	}
	if uncertain {
		// Provisional state was rolled back: the instance the entry would
		// create is not visible on the leader.
		k := "_m/" + td.Machine.Name + "/" + p.InstanceKey()
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		g, gerr := lead.Client().Get(cctx, &writv1.GetRequest{Key: k, Serializable: true})
		cancel()
		if gerr == nil && g.Found {
			c.fail(de.typ, "provisional state must be rolled back on UNCERTAIN (W2)", "after UNCERTAIN, %s is visible on the leader: %v", k, g.Record)
		}
	}
	if err := c.healthy(ctx); err != nil {
		return c.harnessBroke(err)
	}
	// The outcome is queryable and a retry with the same ID is safe.
	r2, od2, err := submit(ctx, lead, de.id, de.typ, string(de.data), 5*time.Second)
	c.out.Cases++
	if err != nil && (od2 == nil || od2.Outcome == writv1.Outcome_UNCERTAIN) {
		c.fail(de.typ, "a retry with the same request ID after heal must get a definite answer", "retry of %s: %v", de.id, err)
	}
	if err := c.converge(ctx, 30*time.Second); err != nil {
		c.fail("replicas", "replicas must converge", "%v", err)
	}
	if r2 != nil && r2.Outcome == writv1.Outcome_COMMITTED {
		// Applied at most once: the outcome names one index everywhere.
		idx := map[uint64]bool{}
		for _, n := range c.nodes {
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			o, oerr := n.Client().Outcome(cctx, &writv1.OutcomeRequest{RequestId: de.id})
			cancel()
			if oerr == nil && o.Known {
				idx[o.Index] = true
			}
		}
		if len(idx) != 1 {
			c.fail(de.typ, "a retried request must apply once", "request %s recorded at indexes %v", de.id, idx)
		}
	}
	if !uncertain {
		return Outcome{NotRun: "the leader stepped down before the commit timeout, so UNCERTAIN could not be provoked (the request got a definite UNAVAILABLE/REJECTED)", Findings: c.out.Findings}
	}
	return c.out
}
