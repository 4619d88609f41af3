package sim

import "time"

// Fault kinds injected in the fault phase (besides the message faults:
// drop, duplicate, delay).
const (
	FaultCrash         = "crash"        // one node, random
	FaultCrashLeader   = "crash-leader" // the leader
	FaultCrashTwo      = "crash-two"    // two nodes at once
	FaultCrashAll      = "crash-all"    // every node at once
	FaultPartition     = "partition"    // one node cut off both ways
	FaultPartitionOne  = "partition-oneway"
	FaultPartitionLead = "partition-leader"
)

var faultKinds = []string{FaultCrash, FaultCrashLeader, FaultCrashTwo, FaultCrashAll, FaultPartition, FaultPartitionOne, FaultPartitionLead}

// scheduleFaults draws the run's faults: the first is the seed's turn in
// the list of kinds (consecutive seeds inject every kind), the rest are
// drawn; each starts in the fault phase and is held 50–400 ms. Message
// faults are on for the whole phase.
func (w *World) scheduleFaults() {
	c := w.cfg
	w.net.drop, w.net.dup, w.net.reorder = c.Drop, c.Dup, c.Reorder
	for i := range c.Faults {
		kind := faultKinds[w.rng.Intn(len(faultKinds))]
		if i == 0 {
			kind = faultKinds[int(uint64(c.Seed)%uint64(len(faultKinds)))]
		}
		at := 100*time.Millisecond + time.Duration(w.rng.Int63n(int64(c.FaultPhase-150*time.Millisecond)))
		hold := 50*time.Millisecond + time.Duration(w.rng.Int63n(int64(350*time.Millisecond)))
		w.after(at, func() { w.inject(kind, hold) })
	}
}

func (w *World) leaderOrRandom() *node {
	for _, n := range w.nodes {
		if n.up && n.isLeader {
			return n
		}
	}
	return w.nodes[w.rng.Intn(len(w.nodes))]
}

func (w *World) inject(kind string, hold time.Duration) {
	if w.healed {
		return
	}
	w.stats.Faults[kind]++
	w.traceEvent("fault:"+kind, 0, 0)
	var victims []*node
	switch kind {
	case FaultCrash:
		victims = []*node{w.nodes[w.rng.Intn(len(w.nodes))]}
	case FaultCrashLeader:
		victims = []*node{w.leaderOrRandom()}
	case FaultCrashTwo:
		a := w.rng.Intn(len(w.nodes))
		b := (a + 1 + w.rng.Intn(len(w.nodes)-1)) % len(w.nodes)
		victims = []*node{w.nodes[a], w.nodes[b]}
	case FaultCrashAll:
		victims = w.nodes
	case FaultPartition, FaultPartitionLead, FaultPartitionOne:
		v := w.nodes[w.rng.Intn(len(w.nodes))]
		if kind == FaultPartitionLead {
			v = w.leaderOrRandom()
		}
		var cut [][2]int
		for _, o := range w.nodes {
			if o == v {
				continue
			}
			switch {
			case kind != FaultPartitionOne:
				cut = append(cut, [2]int{v.idx, o.idx}, [2]int{o.idx, v.idx})
			case w.rng.Intn(2) == 0:
				cut = append(cut, [2]int{v.idx, o.idx}) // v cannot send
			default:
				cut = append(cut, [2]int{o.idx, v.idx}) // v cannot hear
			}
		}
		for _, p := range cut {
			w.net.cut[p[0]][p[1]] = true
		}
		w.after(hold, func() {
			for _, p := range cut {
				w.net.cut[p[0]][p[1]] = false
			}
		})
		return
	}
	for _, v := range victims {
		w.crash(v)
		life := v.life
		w.after(hold, func() {
			if !v.up && v.life == life {
				w.restart(v)
			}
		})
	}
}

func (w *World) crash(n *node) {
	if !n.up {
		return
	}
	lost := n.crash()
	w.stats.LostWrites += lost
	w.traceEvent("crash", uint64(n.idx), uint64(lost))
}

func (w *World) restart(n *node) {
	if err := n.start(); err != nil {
		w.fail("restart %s: %v", n.name, err)
		return
	}
	w.stats.Faults["restart"]++
	w.traceEvent("restart", uint64(n.idx), n.disk.lastIndex())
	w.checks.restarted(n)
}

// heal ends the fault phase: links restored, message faults off, crashed
// nodes restarted.
func (w *World) heal() {
	w.healed = true
	w.traceEvent("heal", 0, 0)
	w.net.drop, w.net.dup, w.net.reorder = 0, 0, 0
	for i := range w.net.cut {
		for j := range w.net.cut[i] {
			w.net.cut[i][j] = false
		}
	}
	for _, n := range w.nodes {
		if !n.up {
			w.restart(n)
		}
	}
}
