// Package patterndfa compiles the field patterns of a schema that are
// anchored at both ends and ASCII-only into a DFA over bytes. writ gen emits
// the DFA as a table-driven matcher (schema/gen) and the runtime catalog
// runs it directly (schema/runtimecat), so a pattern is decided by the same
// automaton in both catalogs; every other pattern stays a regexp.Regexp.
// Standard library only.
package patterndfa

import (
	"regexp/syntax"
	"slices"
	"strconv"
	"unicode"
)

// Patterns anchored at both ends (^…$) whose every matchable character is
// ASCII are compiled at generation time into a DFA over bytes and emitted
// as a table-driven loop; everything else stays a regexp.Regexp.
//
// The DFA decides exactly the language regexp.MatchString accepts: with
// both anchors, MatchString(s) is "s is in the language of the pattern",
// which does not depend on leftmost-first or greedy choices. A byte >= 0x80
// (part of a multi-byte rune, or invalid UTF-8, which regexp reads as
// U+FFFD) can never be matched by an ASCII-only pattern, and the DFA sends
// it to the dead state.

// Limits beyond which a pattern keeps using regexp.
const (
	maxNFANodes  = 4096
	maxDFAStates = 1024
)

// byteSet is a set of bytes.
type byteSet [4]uint64

func (s *byteSet) add(lo, hi int) {
	for c := lo; c <= hi; c++ {
		s[c>>6] |= 1 << (c & 63)
	}
}

func (s *byteSet) has(c int) bool { return s[c>>6]&(1<<(c&63)) != 0 }

// nfaNode is a Thompson NFA node: a byte step (set, out), an epsilon split
// (out, alt), or, with match, the accepting node.
type nfaNode struct {
	set   byteSet
	step  bool
	out   int
	alt   int // -1 when the node is not a split
	match bool
}

type nfa struct {
	nodes []nfaNode
	ok    bool
	big   bool // ok turned false on a size limit
}

func (n *nfa) add(x nfaNode) int {
	if len(n.nodes) >= maxNFANodes {
		n.ok, n.big = false, true
	}
	n.nodes = append(n.nodes, x)
	return len(n.nodes) - 1
}

// build adds nodes matching re followed by the fragment at next and
// returns the entry node. n.ok turns false for an unsupported construct.
func (n *nfa) build(re *syntax.Regexp, next int) int {
	if !n.ok {
		return next
	}
	switch re.Op {
	case syntax.OpEmptyMatch:
		return next
	case syntax.OpNoMatch:
		return n.add(nfaNode{step: true, out: next, alt: -1})
	case syntax.OpLiteral:
		for i := len(re.Rune) - 1; i >= 0; i-- {
			var s byteSet
			// A case-folded literal matches its whole fold orbit (which
			// leaves ASCII for k and s: K, ſ).
			for r := re.Rune[i]; ; {
				if r < 0 || r > 0x7f {
					n.ok = false
					return next
				}
				s.add(int(r), int(r))
				if re.Flags&syntax.FoldCase == 0 {
					break
				}
				if r = unicode.SimpleFold(r); r == re.Rune[i] {
					break
				}
			}
			next = n.add(nfaNode{set: s, step: true, out: next, alt: -1})
		}
		return next
	case syntax.OpCharClass:
		var s byteSet
		for i := 0; i+1 < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			if lo < 0 || hi > 0x7f || lo > hi {
				n.ok = false
				return next
			}
			s.add(int(lo), int(hi))
		}
		return n.add(nfaNode{set: s, step: true, out: next, alt: -1})
	case syntax.OpCapture:
		return n.build(re.Sub[0], next)
	case syntax.OpConcat:
		for i := len(re.Sub) - 1; i >= 0; i-- {
			next = n.build(re.Sub[i], next)
		}
		return next
	case syntax.OpAlternate:
		entry := n.build(re.Sub[len(re.Sub)-1], next)
		for i := len(re.Sub) - 2; i >= 0; i-- {
			entry = n.add(nfaNode{out: n.build(re.Sub[i], next), alt: entry})
		}
		return entry
	case syntax.OpQuest:
		return n.add(nfaNode{out: n.build(re.Sub[0], next), alt: next})
	case syntax.OpStar:
		return n.star(re.Sub[0], next)
	case syntax.OpPlus:
		return n.build(re.Sub[0], n.star(re.Sub[0], next))
	case syntax.OpRepeat:
		if re.Min < 0 || (re.Max >= 0 && re.Max < re.Min) {
			n.ok = false
			return next
		}
		if re.Max < 0 {
			next = n.star(re.Sub[0], next)
		} else {
			// The optional tail x{0,max-min}: (x(x(x)?)?)?.
			for i := 0; i < re.Max-re.Min && n.ok; i++ {
				next = n.add(nfaNode{out: n.build(re.Sub[0], next), alt: next})
			}
		}
		for i := 0; i < re.Min && n.ok; i++ {
			next = n.build(re.Sub[0], next)
		}
		return next
	}
	// Anchors in the middle, word boundaries, any-char (which matches
	// non-ASCII runes): not compiled.
	n.ok = false
	return next
}

func (n *nfa) star(sub *syntax.Regexp, next int) int {
	split := n.add(nfaNode{out: -1, alt: next})
	n.nodes[split].out = n.build(sub, split)
	return split
}

// dfa is a pattern compiled to a deterministic automaton over bytes. State
// 0 is dead, state 1 the start. Bytes in class 0 lead every state to the
// dead state.
type DFA struct {
	Class  [256]uint8 // byte → class (0: matched nowhere in the pattern)
	NClass int
	Next   [][]int // state → class → state (0 is the dead state, 1 the start)
	Accept []bool
}

// Compile compiles p into a DFA when p is anchored at both ends and
// built only from ASCII literals and classes, concatenation, alternation,
// groups and repetition; ok is false otherwise (the caller keeps regexp).
func Compile(p string) (*DFA, bool) {
	d, _ := CompileSized(p)
	return d, d != nil
}

// CompileSized is Compile; without a DFA, tooBig tells whether the
// pattern has a supported shape but exceeds the size limits.
func CompileSized(p string) (d *DFA, tooBig bool) {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil || re.Op != syntax.OpConcat || len(re.Sub) < 2 ||
		re.Sub[0].Op != syntax.OpBeginText || re.Sub[len(re.Sub)-1].Op != syntax.OpEndText {
		return nil, false
	}
	n := &nfa{ok: true}
	final := n.add(nfaNode{match: true, alt: -1})
	start := final
	for i := len(re.Sub) - 2; i >= 1; i-- {
		start = n.build(re.Sub[i], start)
	}
	if !n.ok {
		return nil, n.big
	}
	d, ok := n.determinize(start)
	return d, !ok
}

// closure adds the epsilon closure of node i to set.
func (n *nfa) closure(i int, seen []bool, set *[]int) {
	for {
		if seen[i] {
			return
		}
		seen[i] = true
		nd := &n.nodes[i]
		if nd.step || nd.match {
			*set = append(*set, i)
			return
		}
		if nd.alt >= 0 {
			n.closure(nd.alt, seen, set)
		}
		i = nd.out
	}
}

func (n *nfa) determinize(start int) (*DFA, bool) {
	d := &DFA{}
	// Byte classes: bytes with the same membership in every step set.
	sigs := map[string]uint8{}
	for c := 0; c < 256; c++ {
		var sig []byte
		for i := range n.nodes {
			if n.nodes[i].step && n.nodes[i].set.has(c) {
				sig = strconv.AppendInt(append(sig, ','), int64(i), 10)
			}
		}
		if len(sig) == 0 {
			continue
		}
		id, ok := sigs[string(sig)]
		if !ok {
			if len(sigs) == 255 {
				return nil, false
			}
			id = uint8(len(sigs) + 1)
			sigs[string(sig)] = id
		}
		d.Class[c] = id
	}
	d.NClass = len(sigs) + 1
	// Representative byte of every class.
	rep := make([]int, d.NClass)
	for c := 255; c >= 0; c-- {
		rep[d.Class[c]] = c
	}

	key := func(set []int) string {
		var b []byte
		for _, i := range set {
			b = strconv.AppendInt(append(b, ','), int64(i), 10)
		}
		return string(b)
	}
	index := map[string]int{"": 0}
	var sets [][]int
	newState := func(set []int) (int, bool) {
		slices.Sort(set)
		set = slices.Compact(set)
		k := key(set)
		if id, ok := index[k]; ok {
			return id, true
		}
		if len(sets) >= maxDFAStates {
			return 0, false
		}
		id := len(sets)
		index[k] = id
		sets = append(sets, set)
		return id, true
	}
	sets = append(sets, nil) // dead
	var init []int
	n.closure(start, make([]bool, len(n.nodes)), &init)
	if _, ok := newState(init); !ok {
		return nil, false
	}
	for s := 0; s < len(sets); s++ {
		row := make([]int, d.NClass)
		accept := false
		for _, i := range sets[s] {
			accept = accept || n.nodes[i].match
		}
		for cl := 1; cl < d.NClass; cl++ {
			var to []int
			seen := make([]bool, len(n.nodes))
			for _, i := range sets[s] {
				nd := &n.nodes[i]
				if nd.step && nd.set.has(rep[cl]) {
					n.closure(nd.out, seen, &to)
				}
			}
			id, ok := newState(to)
			if !ok {
				return nil, false
			}
			row[cl] = id
		}
		d.Next = append(d.Next, row)
		d.Accept = append(d.Accept, accept)
	}
	if len(d.Next) < 2 {
		// The start closure was empty (cannot happen: the final node is
		// always reachable by construction), so keep regexp.
		return nil, false
	}
	return d, true
}

// Match runs the DFA on s (the code writ gen emits does the same).
func (d *DFA) Match(s string) bool {
	st := 1
	for i := 0; i < len(s); i++ {
		st = d.Next[st][d.Class[s[i]]]
		if st == 0 {
			return false
		}
	}
	return d.Accept[st]
}
