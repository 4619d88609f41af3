package sim

import (
	"bytes"
	"crypto/sha256"
	"fmt"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/pipeline"
)

// The checks (docs/robustness.md, "Deterministic simulation"):
//
//	election-safety    at most one leader per term
//	log-matching       two logs with an entry of equal index and term
//	                   hold equal entries up to it
//	committed-stable   an applied (so committed) entry is the same entry,
//	                   with the same apply decisions, on every node and
//	                   across every crash and restart
//	ack-durable        when a request is answered COMMITTED at index i,
//	                   the entry at i is durable on a majority's disks
//	acked-present      after heal every acknowledged request is applied
//	                   on every node, once, at the index its answer named
//	not-committed-absent  a request answered NOT_COMMITTED or REJECTED is
//	                   not applied anywhere
//	conf-agreement, state-agreement  after heal, equal configurations,
//	                   applied indexes and state hashes
//	converged          the nodes converge and every request finishes
//	                   within the heal timeout
type checker struct {
	w        *World
	leaders  map[uint64]int
	applied  map[uint64]appliedRec // by index: the first application seen
	requests []*request
}

type appliedRec struct {
	term    uint64
	digest  [32]byte // of the entry's type and data
	results string   // of the apply decisions
	node    string
}

func (c *checker) init(w *World) {
	c.w, c.leaders, c.applied = w, map[uint64]int{}, map[uint64]appliedRec{}
}

func (c *checker) sawLeader(n *node, term uint64) {
	if prev, ok := c.leaders[term]; ok && prev != n.idx {
		c.w.violate("election-safety", "term %d has two leaders: %s and %s", term, c.w.nodes[prev].name, n.name)
		return
	}
	c.leaders[term] = n.idx
}

func (w *World) sawLeader(n *node, term uint64) { w.checks.sawLeader(n, term) }

func (w *World) sawApplied(n *node, e *raftpb.Entry, results []kv.Result) {
	w.stats.Applies++
	w.traceEvent("apply", uint64(n.idx), e.GetIndex())
	c := &w.checks
	rec := appliedRec{term: e.GetTerm(), node: n.name,
		digest:  sha256.Sum256(append([]byte{byte(e.GetType())}, e.GetData()...)),
		results: fmt.Sprint(results)}
	prev, ok := c.applied[e.GetIndex()]
	if !ok {
		c.applied[e.GetIndex()] = rec
		return
	}
	if prev.term != rec.term || prev.digest != rec.digest {
		w.violate("committed-stable", "entry %d applied on %s with term %d, on %s with term %d (or other data)", e.GetIndex(), prev.node, prev.term, n.name, rec.term)
	} else if prev.results != rec.results {
		w.violate("committed-stable", "entry %d decided %s on %s and %s on %s", e.GetIndex(), prev.results, prev.node, rec.results, n.name)
	}
}

// acked checks ack-durable at the moment of the answer.
func (c *checker) acked(r *request, at *node) {
	w := c.w
	rec, ok := c.applied[r.index]
	if !ok {
		w.violate("ack-durable", "request %s answered COMMITTED at %d on %s, which no node applied", r.id, r.index, at.name)
		return
	}
	durable := 0
	for _, n := range w.nodes {
		if n.disk.has(r.index, rec.term) {
			durable++
		}
	}
	if durable <= len(w.nodes)/2 {
		w.violate("ack-durable", "request %s answered COMMITTED at %d on %s while durable on %d of %d disks", r.id, r.index, at.name, durable, len(w.nodes))
	}
}

// restarted checks that a node's durable log agrees with what was applied.
func (c *checker) restarted(n *node) {
	for _, e := range n.disk.ents {
		if rec, ok := c.applied[e.GetIndex()]; ok && e.GetIndex() <= n.disk.hs.GetCommit() && rec.term != e.GetTerm() {
			c.w.violate("committed-stable", "%s restarted with entry %d of term %d, committed with term %d", n.name, e.GetIndex(), e.GetTerm(), rec.term)
		}
	}
}

func (w *World) converged() bool {
	for _, c := range w.clients {
		if !c.done {
			return false
		}
	}
	var lead *node
	for _, n := range w.nodes {
		if !n.up || n.appending || n.applying || len(n.appendq)+len(n.applyq) > 0 {
			return false
		}
		if n.isLeader {
			lead = n
		}
	}
	if lead == nil {
		return false
	}
	commit := lead.rn.BasicStatus().GetCommit()
	for _, n := range w.nodes {
		if n.lead != lead.id || n.st.Applied != commit {
			return false
		}
	}
	return true
}

func (w *World) convergeState() string {
	var b bytes.Buffer
	for _, n := range w.nodes {
		if !n.up {
			fmt.Fprintf(&b, "%s down; ", n.name)
			continue
		}
		bs := n.rn.BasicStatus()
		fmt.Fprintf(&b, "%s lead=%d term=%d commit=%d applied=%d; ", n.name, n.lead, bs.GetTerm(), bs.GetCommit(), n.st.Applied)
	}
	open := 0
	for _, c := range w.clients {
		if !c.done {
			open++
		}
	}
	fmt.Fprintf(&b, "%d clients not done", open)
	return b.String()
}

// final runs the checks after heal.
func (c *checker) final() {
	w := c.w
	if w.panicked {
		return
	}
	for _, n := range w.nodes {
		if !n.up {
			return // not converged: reported
		}
	}
	c.logMatching()
	ref := w.nodes[0]
	for _, n := range w.nodes[1:] {
		if !proto.Equal(n.cs, ref.cs) {
			w.violate("conf-agreement", "%s has configuration %v, %s %v", n.name, n.cs, ref.name, ref.cs)
		}
		if n.st.Applied != ref.st.Applied || n.st.hash() != ref.st.hash() {
			w.violate("state-agreement", "%s at %d hash %s, %s at %d hash %s", n.name, n.st.Applied, n.st.hash(), ref.name, ref.st.Applied, ref.st.hash())
		}
	}
	for idx := range c.applied {
		if idx > ref.st.Applied {
			w.violate("committed-stable", "entry %d was applied but the converged nodes are at %d", idx, ref.st.Applied)
		}
	}
	for _, r := range c.requests {
		for _, n := range w.nodes {
			res, ok := n.st.Outcomes["req:"+r.id]
			applied := ok && res.Status == kv.StatusApplied
			switch {
			case r.acked && (!applied || res.Index != r.index):
				w.violate("acked-present", "request %s answered COMMITTED at %d is %v on %s", r.id, r.index, res, n.name)
			case (r.final == pipeline.StatusNotCommitted || r.final == pipeline.StatusRejected) && applied:
				w.violate("not-committed-absent", "request %s answered %s is applied at %d on %s", r.id, r.final, res.Index, n.name)
			}
		}
	}
}

// logMatching compares every pair of nodes' logs where both hold entries.
func (c *checker) logMatching() {
	w := c.w
	for i, a := range w.nodes {
		for _, b := range w.nodes[i+1:] {
			fa, _ := a.ms.FirstIndex()
			fb, _ := b.ms.FirstIndex()
			la, _ := a.ms.LastIndex()
			lb, _ := b.ms.LastIndex()
			lo, hi := max(fa, fb), min(la, lb)
			if lo > hi {
				continue
			}
			ea, err1 := a.ms.Entries(lo, hi+1, 1<<62)
			eb, err2 := b.ms.Entries(lo, hi+1, 1<<62)
			if err1 != nil || err2 != nil {
				w.fail("read logs %s/%s: %v %v", a.name, b.name, err1, err2)
				continue
			}
			match := -1 // highest position where the terms match
			for k := range ea {
				if ea[k].GetTerm() == eb[k].GetTerm() {
					match = k
				}
			}
			for k := 0; k <= match; k++ {
				if !proto.Equal(ea[k], eb[k]) {
					w.violate("log-matching", "%s and %s agree on entry %d's term but differ at %d", a.name, b.name, ea[match].GetIndex(), ea[k].GetIndex())
					break
				}
			}
		}
	}
}
