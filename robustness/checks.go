package robustness

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/writ-dev/writ/api/writv1"
)

// CheckResult is one checker's verdict on a run.
type CheckResult struct {
	Name     string   `json:"name"`
	Pass     bool     `json:"pass"`
	Cases    int      `json:"cases"`
	Failures int      `json:"failures,omitempty"`
	Detail   []string `json:"detail,omitempty"` // the first few failures
}

func (c *CheckResult) fail(format string, args ...any) {
	c.Pass = false
	c.Failures++
	if len(c.Detail) < 8 {
		c.Detail = append(c.Detail, fmt.Sprintf(format, args...))
	}
}

// nodeOutcome is what one node's Outcome says of an ID.
type nodeOutcome struct {
	err   error
	known bool
	out   writv1.Outcome
	index uint64
	stat  string
}

func (o nodeOutcome) committed() bool {
	return o.err == nil && o.known && o.out == writv1.Outcome_COMMITTED
}

// outcomes asks every node for the outcome of every ID (linearizable).
func outcomes(ctx context.Context, cl *Cluster, ids []string) map[string][]nodeOutcome {
	return outcomesOf(ctx, cl, ids, false)
}

// outcomesOf asks every node for the outcome of every ID, a few calls at
// a time per node; serializable answers from each node's own applied
// table (no read barrier).
func outcomesOf(ctx context.Context, cl *Cluster, ids []string, serializable bool) map[string][]nodeOutcome {
	res := map[string][]nodeOutcome{}
	for _, id := range ids {
		res[id] = make([]nodeOutcome, len(cl.nodes))
	}
	workers := min(8, 1+len(ids)/64)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, n := range cl.nodes {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// A node may lose its leader for a moment after heal (an
				// election on a loaded machine): a failed call is retried after
				// a pause, within a budget per node so that a node that does
				// not answer at all costs at most that.
				budget := 15 * time.Second
				for k := w; k < len(ids); k += workers {
					id := ids[k]
					var o nodeOutcome
					for try := 0; try < 8; try++ {
						cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
						r, err := n.client.Outcome(cctx, &writv1.OutcomeRequest{RequestId: id, Serializable: serializable})
						cancel()
						if err == nil {
							o = nodeOutcome{known: r.Known, out: r.Outcome, index: r.Index, stat: r.Status}
							break
						}
						o = nodeOutcome{err: err}
						if budget <= 0 {
							if try >= 2 {
								break
							}
							continue
						}
						pause := 250 * time.Millisecond
						budget -= pause
						sleepCtx(ctx, pause)
					}
					mu.Lock()
					res[id][i] = o
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	return res
}

func describe(os []nodeOutcome) string {
	var b []string
	for i, o := range os {
		switch {
		case o.err != nil:
			b = append(b, fmt.Sprintf("n%d: unreadable (%v)", i+1, o.err))
		case !o.known:
			b = append(b, fmt.Sprintf("n%d: unknown", i+1))
		default:
			b = append(b, fmt.Sprintf("n%d: %s %s@%d", i+1, o.out, o.stat, o.index))
		}
	}
	return strings.Join(b, ", ")
}

// sameEverywhere reports whether every node knows id committed at one index,
// and that index.
func sameEverywhere(os []nodeOutcome) (uint64, bool) {
	var idx uint64
	for i, o := range os {
		if !o.committed() {
			return 0, false
		}
		if i == 0 {
			idx = o.index
		} else if o.index != idx {
			return 0, false
		}
	}
	return idx, true
}

// idAttempts groups a run's calls by the ID they carried.
type idAttempts struct {
	kind, typ, key string
	ops            []Op
}

func byID(ops []Op) (map[string]*idAttempts, []string) {
	m := map[string]*idAttempts{}
	var order []string
	for _, op := range ops {
		if op.Kind != "submit" && op.Kind != "report" {
			continue
		}
		oid := outcomeID(op)
		a := m[oid]
		if a == nil {
			a = &idAttempts{kind: op.Kind, typ: op.Type, key: op.Key}
			m[oid] = a
			order = append(order, oid)
		}
		a.ops = append(a.ops, op)
	}
	return m, order
}

// outcomeID is the ID Outcome answers for: a request ID, or a fact's
// "fact:<type>:<id>".
func outcomeID(op Op) string {
	if op.Kind == "report" {
		return "fact:" + op.Type + ":" + op.ID
	}
	return op.ID
}

// checkAcknowledged: (a) every COMMITTED request is committed on every
// node, at the index its reply named; (b) every received fact is
// committed once, at one index, on every node; (c) nothing answered only
// REJECTED or UNAVAILABLE is committed anywhere. It returns every
// committed command for the linearizability check. The answers that
// decided nothing are checkSettled's.
func checkAcknowledged(ids map[string]*idAttempts, order []string, res map[string][]nodeOutcome, convergedAt int64) (a, b, c CheckResult, cmds []resolved) {
	a = CheckResult{Name: "acknowledged-not-lost", Pass: true}
	b = CheckResult{Name: "facts-exactly-once", Pass: true}
	c = CheckResult{Name: "refused-absent", Pass: true}
	for _, id := range order {
		at := ids[id]
		os := res[id]
		var committed, received, refusedOnly = false, false, true
		var reply uint64
		call, ret := at.ops[0].Start, convergedAt
		for _, op := range at.ops {
			call = min(call, op.Start)
			switch op.Outcome {
			case "COMMITTED":
				committed, reply, ret = true, op.Index, op.End
				refusedOnly = false
			case outReceived:
				received = true
				refusedOnly = false
			case "REJECTED", "UNAVAILABLE":
			default: // UNCERTAIN, NOT_COMMITTED, ERROR
				refusedOnly = false
			}
		}
		idx, same := sameEverywhere(os)
		switch {
		case at.kind == "submit" && committed:
			a.Cases++
			switch {
			case !same:
				a.fail("%s (%s) answered COMMITTED at %d but: %s", id, at.typ, reply, describe(os))
			case idx != reply:
				a.fail("%s (%s) answered COMMITTED at index %d but every node has it at %d", id, at.typ, reply, idx)
			}
		case at.kind == "report" && received:
			b.Cases++
			if !same {
				b.fail("fact %s received but: %s", id, describe(os))
			}
		case refusedOnly:
			c.Cases++
			for i, o := range os {
				if o.committed() {
					c.fail("%s (%s) was answered %s on every attempt but n%d has it committed at %d (%s; last answer: %s)", id, at.typ, at.ops[len(at.ops)-1].Outcome, i+1, o.index, describe(os), at.ops[len(at.ops)-1].Reason)
					break
				}
			}
		}
		if ci, ok := committedIndex(os); ok {
			cmds = append(cmds, resolved{index: ci, call: call, ret: ret, key: at.key, typ: at.typ, desc: at.typ + " " + id})
		}
	}
	return a, b, c, cmds
}

// committedIndex is the index the nodes that have id committed agree on
// (ok=false when none has it, or they disagree: check (a) or (b) says so).
func committedIndex(os []nodeOutcome) (uint64, bool) {
	var idx uint64
	for _, o := range os {
		if !o.committed() {
			continue
		}
		if idx != 0 && o.index != idx {
			return 0, false
		}
		idx = o.index
	}
	return idx, idx != 0
}

// checkLogs: (g) no node log holds a panic, a fatal error or a data race,
// and no node exited except by the nemesis or the shutdown.
func checkLogs(cl *Cluster, exits []string) CheckResult {
	r := CheckResult{Name: "no-crash", Pass: true}
	for _, e := range exits {
		r.fail("%s", e)
	}
	for _, n := range cl.nodes {
		r.Cases++
		if bad := crashIn(n.Log); bad != "" {
			r.fail("%s%s", n.Name, bad)
		}
	}
	return r
}

// crashIn is the first line of a node log that shows a panic, a fatal
// error or a data race (".log:LINE: TEXT"), or why the log is unreadable;
// "" if none.
func crashIn(log string) string {
	f, err := os.Open(log)
	if err != nil {
		return fmt.Sprintf(": log unreadable: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	line := 0
	for sc.Scan() {
		line++
		t := sc.Text()
		if strings.HasPrefix(t, "panic:") || strings.HasPrefix(t, "fatal error:") || strings.Contains(t, "WARNING: DATA RACE") {
			return fmt.Sprintf(".log:%d: %s", line, t)
		}
	}
	return ""
}

// checkOrphans: (g) no process of the run's plugin binaries outlives the
// cluster (bounded wait: a plugin whose node was just stopped may take a
// moment to exit).
func checkOrphans(plugins []string, d time.Duration) CheckResult {
	r := CheckResult{Name: "no-orphan-plugins", Pass: true, Cases: len(plugins)}
	want := map[string]bool{}
	for _, p := range plugins {
		if abs, err := filepath.Abs(p); err == nil {
			want[abs] = true
		}
	}
	var left []string
	_ = poll(context.Background(), d, func() (bool, string) {
		left = left[:0]
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
			if err == nil && want[strings.TrimSuffix(exe, " (deleted)")] {
				left = append(left, fmt.Sprintf("pid %d (%s)", pid, filepath.Base(exe)))
			}
		}
		return len(left) == 0, ""
	})
	sort.Strings(left)
	for _, l := range left {
		r.fail("plugin process %s outlived its node", l)
	}
	return r
}
