package raftstore

import (
	"crypto/sha256"
	"fmt"
	"sort"

	"go.etcd.io/raft/v3"
	"google.golang.org/protobuf/proto"

	"github.com/writ-dev/writ/kv"
)

// The simulation's checks, after every step and at the end:
//
//   - election safety: at most one leader per term, ever;
//   - log matching: two logs with an entry of the same index and term hold
//     the same entry, and agree on every entry before it;
//   - committed entries are never lost and never differ: every node applies
//     the same commands with the same results at an index, and at the end
//     every node has applied everything any node applied before, with equal
//     state hashes, and every acknowledged command is in every node's state
//     at its acknowledged index (across every crash and restart);
//   - ack ⇒ majority-durable: when a proposal is acknowledged to its client,
//     its entry is in the synced log of a majority of the voters;
//   - conf-state agreement: nodes that applied the same index have the same
//     configuration, and it is raft's own.

type simChecker struct {
	w          *world
	leaders    map[uint64]string // term → leader
	applied    map[uint64]string // index → digest of the commands and results applied there
	maxApplied uint64
	confAt     map[uint64]string // applied index → configuration
	terms      map[uint64]uint64 // index → term of the entry applied there
	logs       map[[2]uint64][32]byte
}

func newSimChecker(w *world) *simChecker {
	return &simChecker{w: w, leaders: map[uint64]string{}, applied: map[uint64]string{},
		confAt: map[uint64]string{}, terms: map[uint64]uint64{}, logs: map[[2]uint64][32]byte{}}
}

// simObserver records what a node applies.
type simObserver struct {
	ck   *simChecker
	node string
}

func (o *simObserver) Applied(index uint64, batch []kv.Command, results []kv.Result) {
	h := sha256.New()
	for i, c := range batch {
		fmt.Fprintf(h, "%q %d %d|", c.ID, results[i].Status, results[i].Index)
		for _, wr := range c.Effect.Writes {
			fmt.Fprintf(h, "%q=%q;", wr.Key, wr.Value)
		}
	}
	d := fmt.Sprintf("%x", h.Sum(nil)[:8])
	ck := o.ck
	if prev, ok := ck.applied[index]; ok && prev != d {
		ck.w.failf("committed entry differs: %s applied %s at index %d, another node %s", o.node, d, index, prev)
	}
	ck.applied[index] = d
	ck.maxApplied = max(ck.maxApplied, index)
}

func (o *simObserver) Restored(uint64) {}

func (ck *simChecker) afterStep() {
	w := ck.w
	for _, sd := range w.nodes {
		if sd.n == nil {
			continue
		}
		sd.n.rnMu.Lock()
		st := sd.n.rn.BasicStatus()
		sd.n.rnMu.Unlock()
		if st.RaftState != raft.StateLeader {
			continue
		}
		term := st.GetTerm()
		if prev, ok := ck.leaders[term]; !ok {
			ck.leaders[term] = sd.name
			w.stats.elections++
			w.tracef("%s leads term %d", sd.name, term)
		} else if prev != sd.name {
			w.failf("election safety: %s and %s both lead term %d", prev, sd.name, term)
		}
	}
	ck.acks()
	if w.step%64 == 0 {
		ck.logMatching()
	}
}

// acks checks every proposal acknowledged in this step.
func (ck *simChecker) acks() {
	w := ck.w
	kept := w.pending[:0]
	for _, pp := range w.pending {
		select {
		case <-pp.p.done:
		default:
			kept = append(kept, pp)
			continue
		}
		if pp.p.err != nil || len(pp.p.results) != 1 || pp.p.results[0].Status != kv.StatusApplied {
			w.tracef("%s: %s finished: %v %v", pp.node.name, pp.id, pp.p.results, pp.p.err)
			continue
		}
		idx := pp.p.results[0].Index
		term, ok := ck.terms[idx]
		if !ok {
			w.failf("%s acknowledged %s at index %d, which it never applied", pp.node.name, pp.id, idx)
			continue
		}
		voters := pp.node.n.confState.GetVoters()
		var durable []string
		for _, v := range voters {
			if sd := w.byID[v]; sd != nil && sd.disk.durable(idx, term) {
				durable = append(durable, sd.name)
			}
		}
		if len(durable) <= len(voters)/2 {
			w.failf("ack before majority-durable: %s acknowledged %s at index %d term %d, in the synced log of only %v of %d voters", pp.node.name, pp.id, idx, term, durable, len(voters))
		}
		w.acked[pp.id] = ackedCommand{node: pp.node.name, index: idx, key: pp.key, value: pp.value}
		w.stats.acks++
		w.tracef("%s: acknowledged %s at %d/%d (durable on %v)", pp.node.name, pp.id, idx, term, durable)
	}
	w.pending = kept
}

// beforeApply records the terms of the committed entries a node applies.
func (ck *simChecker) beforeApply(sd *simNode, tasks []applyTask) {
	for _, t := range tasks {
		for _, e := range t.entries {
			if prev, ok := ck.terms[e.GetIndex()]; ok && prev != e.GetTerm() {
				ck.w.failf("committed entry differs: %s applies index %d of term %d, another node applied term %d", sd.name, e.GetIndex(), e.GetTerm(), prev)
			}
			ck.terms[e.GetIndex()] = e.GetTerm()
		}
	}
}

// afterApply records the configuration a node has at its applied index.
func (ck *simChecker) afterApply(sd *simNode) {
	n := sd.n
	cs := n.confState
	n.rnMu.Lock()
	rst := n.rn.Status()
	n.rnMu.Unlock()
	var rv, rl []uint64
	for id := range rst.Config.Voters[0] {
		rv = append(rv, id)
	}
	for id := range rst.Config.Learners {
		rl = append(rl, id)
	}
	mine := confString(cs.GetVoters(), cs.GetLearners())
	if applied := n.applied.Load(); rst.Applied >= applied {
		if theirs := confString(rv, rl); theirs != mine {
			ck.w.failf("conf state: %s applied %s at %d but raft has %s", sd.name, mine, applied, theirs)
		}
	}
	idx := n.applied.Load()
	if prev, ok := ck.confAt[idx]; ok && prev != mine {
		ck.w.failf("conf state agreement: %s has %s at applied index %d, another node %s", sd.name, mine, idx, prev)
	}
	ck.confAt[idx] = mine
}

func confString(voters, learners []uint64) string {
	v := append([]uint64(nil), voters...)
	l := append([]uint64(nil), learners...)
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	return fmt.Sprintf("voters %x learners %x", v, l)
}

// logMatching checks the stable logs of the nodes that are up.
func (ck *simChecker) logMatching() {
	w := ck.w
	type view struct {
		name        string
		first, last uint64
		terms       map[uint64]uint64
	}
	var views []view
	for _, sd := range w.nodes {
		if sd.n == nil {
			continue
		}
		s := sd.n.storage
		first, _ := s.FirstIndex()
		last, _ := s.LastIndex()
		if last < first {
			continue
		}
		ents, err := s.Entries(first, last+1, 1<<40)
		if err != nil {
			w.failf("%s: read log %d..%d: %v", sd.name, first, last, err)
			return
		}
		v := view{name: sd.name, first: first, last: last, terms: map[uint64]uint64{}}
		for _, e := range ents {
			b, _ := proto.Marshal(e)
			sum := sha256.Sum256(b)
			k := [2]uint64{e.GetIndex(), e.GetTerm()}
			if prev, ok := ck.logs[k]; ok && prev != sum {
				w.failf("log matching: %s holds a different entry at index %d term %d than another log did", sd.name, e.GetIndex(), e.GetTerm())
				return
			}
			ck.logs[k] = sum
			v.terms[e.GetIndex()] = e.GetTerm()
		}
		views = append(views, v)
	}
	for i := range views {
		for j := i + 1; j < len(views); j++ {
			a, b := views[i], views[j]
			lo, hi := max(a.first, b.first), min(a.last, b.last)
			match := uint64(0)
			for k := hi; k >= lo && k > 0; k-- {
				if a.terms[k] == b.terms[k] {
					match = k
					break
				}
			}
			for k := lo; match > 0 && k <= match; k++ {
				if a.terms[k] != b.terms[k] {
					w.failf("log matching: %s and %s agree at index %d but differ at %d (terms %d, %d)", a.name, b.name, match, k, a.terms[k], b.terms[k])
					return
				}
			}
		}
	}
}

// final runs once every node has applied the same index.
func (ck *simChecker) final() {
	w := ck.w
	ck.logMatching()
	var hash0 [32]byte
	var conf0 string
	for i, sd := range w.nodes {
		n := sd.n
		applied, sum, err := n.StateHash()
		if err != nil {
			w.failf("%s: state hash: %v", sd.name, err)
			return
		}
		if applied < ck.maxApplied {
			w.failf("committed entry lost: %s is at %d, a node applied %d before", sd.name, applied, ck.maxApplied)
		}
		conf := confString(n.confState.GetVoters(), n.confState.GetLearners())
		if i == 0 {
			hash0, conf0 = sum, conf
		} else if sum != hash0 {
			w.failf("state hashes differ at applied index %d: %s and %s", applied, w.nodes[0].name, sd.name)
		} else if conf != conf0 {
			w.failf("conf state agreement: %s has %s, %s has %s", sd.name, conf, w.nodes[0].name, conf0)
		}
		ids := make([]string, 0, len(w.acked))
		for id := range w.acked {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			a := w.acked[id]
			r, ok := n.Outcome(id)
			if !ok || r.Status != kv.StatusApplied || r.Index != a.index {
				w.failf("acknowledged command lost: %s (acknowledged by %s at index %d) is %+v (found %v) on %s", id, a.node, a.index, r, ok, sd.name)
				return
			}
		}
	}
}
