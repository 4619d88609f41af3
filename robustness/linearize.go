package robustness

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Linearizability of each machine key's reads and writes. A key's state is
// its revision: the log index of the command that last wrote it. A read
// (linearizable Get) observes it. A write is a command whose outcome,
// resolved on every node after heal, is committed at index I: it sets the
// revision to I when it wrote the key. Whether it did is known when some
// read (or the final state) observed revision I on the key: the write is
// then definite; otherwise it may have written the key or not (a guard
// duplicate, a no-op, a value overwritten before any read). Commands apply
// in index order, so no write sets a revision below the current one. A
// revision that no recorded command explains (a writer outside the
// history) makes the key uncheckable: it is counted, never passed.

type linInput struct {
	write    bool
	rev      uint64 // the read's revision, or the write's index
	definite bool
	desc     string
}

var revModel = porcupine.NondeterministicModel{
	Init: func() []interface{} { return []interface{}{uint64(0)} },
	Step: func(state, input, _ interface{}) []interface{} {
		s, in := state.(uint64), input.(linInput)
		switch {
		case !in.write && in.rev == s:
			return []interface{}{s}
		case !in.write:
			return nil
		case in.rev < s && in.definite:
			return nil
		case in.rev < s:
			return []interface{}{s}
		case in.definite:
			return []interface{}{in.rev}
		}
		return []interface{}{s, in.rev}
	},
	DescribeOperation: func(input, _ interface{}) string { return input.(linInput).desc },
	DescribeState:     func(state interface{}) string { return fmt.Sprintf("rev %d", state.(uint64)) },
}

// resolved is a command's outcome after heal: committed at index (0: not
// committed anywhere).
type resolved struct {
	index uint64
	call  int64 // the first attempt's start
	ret   int64 // the committing attempt's end, or when it is known to be committed
	key   string
	typ   string // the entry type
	id    string // the ID Outcome answers for (receipt items only)
	desc  string
}

// linResult is the linearizability check's result.
type linResult struct {
	Keys        int      `json:"keys"`
	Checked     int      `json:"checked"`
	Linearized  int      `json:"linearizable"`
	Uncheckable []string `json:"uncheckable,omitempty"`
	Illegal     []string `json:"illegal,omitempty"`
	Unknown     []string `json:"unknown,omitempty"`
	Ops         int      `json:"ops"`
}

func (r linResult) ok() bool {
	return len(r.Illegal) == 0 && len(r.Unknown) == 0 && len(r.Uncheckable) == 0
}

// checkLinearizable checks every key read in ops; finals are the keys'
// revisions read on every node after heal (at time at); cmds are the
// resolved commands. Visualisations of failing keys go to dir.
func checkLinearizable(ops []Op, finals map[string][]uint64, at int64, cmds []resolved, dir string, timeout time.Duration) linResult {
	reads := map[string][]porcupine.Operation{}
	observed := map[string]map[uint64]bool{}
	see := func(key string, rev uint64) {
		if observed[key] == nil {
			observed[key] = map[uint64]bool{}
		}
		observed[key][rev] = true
	}
	for _, op := range ops {
		if op.Kind != "get" || op.Outcome != outOK {
			continue
		}
		rev := uint64(0)
		if op.Found {
			rev = op.Rev
		}
		see(op.Key, rev)
		reads[op.Key] = append(reads[op.Key], porcupine.Operation{ClientId: op.Client, Call: op.Start, Return: op.End,
			Input: linInput{rev: rev, desc: fmt.Sprintf("%s get → rev %d", op.Node, rev)}})
	}
	for key, revs := range finals {
		for i, rev := range revs {
			see(key, rev)
			reads[key] = append(reads[key], porcupine.Operation{ClientId: 1000 + i, Call: at, Return: at + 1,
				Input: linInput{rev: rev, desc: fmt.Sprintf("final read n%d → rev %d", i+1, rev)}})
		}
	}
	// firstAtOrPast[key](rev) is the earliest end of a read of key that
	// returned rev or a later revision.
	type seenAt struct {
		rev        uint64
		start, end int64
	}
	readsOf := map[string][]seenAt{}
	for key, ops := range reads {
		for _, o := range ops {
			readsOf[key] = append(readsOf[key], seenAt{o.Input.(linInput).rev, o.Call, o.Return})
		}
	}
	// lastBelow[key](rev) is the latest start of a read of key that
	// returned an earlier revision.
	firstAtOrPast := map[string]func(uint64) int64{}
	lastBelow := map[string]func(uint64) int64{}
	for key := range reads {
		rs := readsOf[key]
		firstAtOrPast[key] = func(rev uint64) int64 {
			t := int64(math.MaxInt64)
			for _, r := range rs {
				if r.rev >= rev {
					t = min(t, r.end)
				}
			}
			return t
		}
		lastBelow[key] = func(rev uint64) int64 {
			t := int64(math.MinInt64)
			for _, r := range rs {
				if r.rev < rev {
					t = max(t, r.start)
				}
			}
			return t
		}
	}
	byIndex := map[uint64][]resolved{}
	for _, c := range cmds {
		if c.index > 0 {
			byIndex[c.index] = append(byIndex[c.index], c)
		}
	}
	var res linResult
	keys := make([]string, 0, len(reads))
	for k := range reads {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		res.Keys++
		hist := append([]porcupine.Operation(nil), reads[key]...)
		var unexplained []string
		for rev := range observed[key] {
			if rev == 0 {
				continue
			}
			cs := byIndex[rev]
			if len(cs) == 0 {
				unexplained = append(unexplained, fmt.Sprint(rev))
				continue
			}
			// The command(s) at index rev wrote the key: one write at the
			// moment that entry applied, which lies within every one of
			// their intervals.
			call, ret := int64(math.MinInt64), int64(math.MaxInt64)
			var desc []string
			for _, c := range cs {
				call, ret = max(call, c.call), min(ret, c.ret)
				desc = append(desc, c.desc)
			}
			// It applied before any read of the key returned a revision at
			// or past it (commands apply in index order), and after every
			// read that returned an earlier revision began (revisions never
			// go down, so such a read took effect before it).
			ret = min(ret, firstAtOrPast[key](rev))
			call = max(call, lastBelow[key](rev))
			if call > ret { // impossible unless intervals are wrong: keep it strict but valid
				call = ret
			}
			hist = append(hist, porcupine.Operation{ClientId: 2000, Call: call, Return: ret,
				Input: linInput{write: true, rev: rev, definite: true, desc: "write @" + fmt.Sprint(rev) + " " + strings.Join(desc, ",")}})
		}
		if len(unexplained) > 0 {
			sort.Strings(unexplained)
			res.Uncheckable = append(res.Uncheckable, fmt.Sprintf("%s: revisions %s written by no recorded command", key, strings.Join(unexplained, ",")))
			continue
		}
		// A committed command whose revision nothing observed is a write
		// that may or may not have set the key (a guard duplicate, a no-op,
		// a value overwritten before any read). The model always lets such
		// a write leave the state as it is, so it can never make a history
		// illegal, nor legal: it is left out, and with it the branching that
		// hundreds of them (a receipt's items) cost porcupine's search.
		res.Checked++
		res.Ops += len(hist)
		m := revModel.ToModel()
		r, info := porcupine.CheckOperationsVerbose(m, hist, timeout)
		switch r {
		case porcupine.Ok:
			res.Linearized++
			continue
		case porcupine.Illegal:
			res.Illegal = append(res.Illegal, key)
		default:
			res.Unknown = append(res.Unknown, key)
		}
		if dir != "" {
			_ = porcupine.VisualizePath(m, info, filepath.Join(dir, "linearizability-"+strings.NewReplacer("/", "_", ":", "_").Replace(key)+".html"))
		}
	}
	return res
}
