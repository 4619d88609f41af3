package gen

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// patGen draws random patterns of the shapes compilePattern takes (ASCII
// literals and classes, groups, alternations, every kind of repetition,
// anchored at both ends), together with strings that match them.
type patGen struct {
	rng   *rand.Rand
	alpha string // the characters literals and classes are drawn from
	big   bool   // a long counted repetition was drawn
}

// node is a drawn pattern piece: its source and a sampler of members.
type node struct {
	src    string
	sample func(*strings.Builder)
}

func (g *patGen) char() byte { return g.alpha[g.rng.IntN(len(g.alpha))] }

func (g *patGen) atom(depth int) node {
	switch k := g.rng.IntN(10); {
	case k < 3:
		c := g.char()
		return node{regexp.QuoteMeta(string(c)), func(b *strings.Builder) { b.WriteByte(c) }}
	case k < 4:
		s := []string{`\d`, `\w`, `\s`, `[[:alpha:]]`, `[[:punct:]]`}[g.rng.IntN(5)]
		re := regexp.MustCompile(`^` + s + `$`)
		var members []byte
		for c := 0; c < 128; c++ {
			if re.MatchString(string(rune(c))) {
				members = append(members, byte(c))
			}
		}
		return node{s, func(b *strings.Builder) { b.WriteByte(members[g.rng.IntN(len(members))]) }}
	case k < 8 || depth > 0:
		var set []byte
		var src strings.Builder
		src.WriteByte('[')
		for n := 1 + g.rng.IntN(3); n > 0; n-- {
			lo, hi := g.char(), g.char()
			if lo > hi {
				lo, hi = hi, lo
			}
			if g.rng.IntN(2) == 0 {
				hi = lo
			}
			for c := lo; ; c++ {
				set = append(set, c)
				if c == hi {
					break
				}
			}
			src.WriteString(classChar(lo))
			if hi != lo {
				src.WriteString("-" + classChar(hi))
			}
		}
		src.WriteByte(']')
		return node{src.String(), func(b *strings.Builder) { b.WriteByte(set[g.rng.IntN(len(set))]) }}
	default:
		alts := make([]node, 1+g.rng.IntN(3))
		srcs := make([]string, len(alts))
		for i := range alts {
			alts[i] = g.seq(depth+1, 1+g.rng.IntN(2))
			srcs[i] = alts[i].src
		}
		open := "("
		if g.rng.IntN(2) == 0 {
			open = "(?:"
		}
		return node{open + strings.Join(srcs, "|") + ")", func(b *strings.Builder) { alts[g.rng.IntN(len(alts))].sample(b) }}
	}
}

func classChar(c byte) string {
	if strings.IndexByte(`\]-^[`, c) >= 0 {
		return `\` + string(c)
	}
	return string(c)
}

func (g *patGen) repeat(depth int) node {
	a := g.atom(depth)
	lo, hi := 1, 1
	q := ""
	switch g.rng.IntN(9) {
	case 0:
		q, lo, hi = "?", 0, 1
	case 1:
		q, lo, hi = "*", 0, 3
	case 2:
		q, lo, hi = "+", 1, 3
	case 3:
		lo = g.rng.IntN(4)
		q, hi = fmt.Sprintf("{%d}", lo), lo
	case 4:
		lo = g.rng.IntN(3)
		q, hi = fmt.Sprintf("{%d,}", lo), lo+2
	case 5, 6:
		lo = g.rng.IntN(3)
		hi = lo + g.rng.IntN(4)
		q = fmt.Sprintf("{%d,%d}", lo, hi)
	case 7:
		if depth > 0 || g.big {
			break
		}
		g.big = true // two long overlapping counts make DFAs too big
		lo, hi = g.rng.IntN(2), 12+g.rng.IntN(50)
		q = fmt.Sprintf("{%d,%d}", lo, hi)
	}
	if q != "" && g.rng.IntN(5) == 0 {
		q += "?" // non-greedy: the same language
	}
	return node{a.src + q, func(b *strings.Builder) {
		for n := lo + g.rng.IntN(hi-lo+1); n > 0; n-- {
			a.sample(b)
		}
	}}
}

func (g *patGen) seq(depth, n int) node {
	parts := make([]node, n)
	var src strings.Builder
	for i := range parts {
		parts[i] = g.repeat(depth)
		src.WriteString(parts[i].src)
	}
	return node{src.String(), func(b *strings.Builder) {
		for _, p := range parts {
			p.sample(b)
		}
	}}
}

func (g *patGen) pattern() node {
	s := g.seq(0, 1+g.rng.IntN(5))
	return node{"^" + s.src + "$", s.sample}
}

// inputs are strings to try on a pattern: members, mutated members, and
// random strings with non-ASCII runes and invalid UTF-8.
func (g *patGen) inputs(p node, n int) []string {
	extra := []string{"A", "é", "\xff", "\x80", "\n", "\x00", "\u212a", "ſ", "\ufffd"}
	out := []string{""}
	for len(out) < n {
		var b strings.Builder
		switch g.rng.IntN(4) {
		case 0, 1:
			p.sample(&b)
		case 2:
			p.sample(&b)
			s := []byte(b.String())
			b.Reset()
			i := 0
			if len(s) > 0 {
				i = g.rng.IntN(len(s) + 1)
			}
			var ins string
			if g.rng.IntN(2) == 0 {
				ins = extra[g.rng.IntN(len(extra))]
			} else {
				ins = string(g.char())
			}
			switch g.rng.IntN(3) {
			case 0: // insert
				b.Write(s[:i])
				b.WriteString(ins)
				b.Write(s[i:])
			case 1: // delete
				if i < len(s) {
					b.Write(s[:i])
					b.Write(s[i+1:])
				} else {
					b.Write(s)
				}
			default: // replace
				b.Write(s[:i])
				b.WriteString(ins)
				if i < len(s) {
					b.Write(s[i+1:])
				}
			}
		default:
			for k := g.rng.IntN(12); k > 0; k-- {
				if g.rng.IntN(5) == 0 {
					b.WriteString(extra[g.rng.IntN(len(extra))])
				} else {
					b.WriteByte(g.char())
				}
			}
		}
		out = append(out, b.String())
	}
	return out
}

var alphabets = []string{"ab", "abc.-01", "az09._-/=", "msh0123456789.", " !\"#$%&'()*+,-./0123456789:;<=>?@AZ[\\]^_`az{|}~\t\x01\x7f"}

// TestPatternDFAAgreesWithRegexp: for thousands of random patterns of the
// supported shapes, compilePattern takes the pattern and its DFA accepts
// exactly the inputs regexp.MatchString accepts.
func TestPatternDFAAgreesWithRegexp(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	patterns, inputs, big := 0, 0, 0
	const n = 2000
	for i := 0; i < n; i++ {
		g := &patGen{rng: rng, alpha: alphabets[i%len(alphabets)]}
		p := g.pattern()
		re, err := regexp.Compile(p.src)
		if err != nil {
			t.Fatalf("drawn pattern %q does not compile: %v", p.src, err)
		}
		d, tooBig := compileDFA(p.src)
		if d == nil {
			if tooBig {
				if big < 5 {
					t.Logf("over the limits: %s", p.src)
				}
				big++
				continue
			}
			t.Fatalf("supported pattern %q was not compiled", p.src)
		}
		patterns++
		for _, in := range g.inputs(p, 60) {
			inputs++
			if got, want := d.Match(in), re.MatchString(in); got != want {
				t.Fatalf("pattern %q, input %q: DFA %v, regexp %v", p.src, in, got, want)
			}
		}
	}
	t.Logf("%d patterns, %d inputs; %d patterns over the size limits", patterns, inputs, big)
	if big > n/50 {
		t.Fatalf("%d of %d patterns over the size limits: the test no longer tests much", big, n)
	}
}

// TestPatternRefusals: what the DFA cannot express exactly stays a regexp.
func TestPatternRefusals(t *testing.T) {
	for _, p := range []string{
		`abc`, `^abc`, `abc$`, `^a|b$`, `(?i)^abk$`, `(?i)^s$`, `^a.b$`, `^\pL+$`, `^[^a]$`, `^é$`, `^a\bb$`,
		`(?m)^a$`, `^a^b$`, `^a$b$`, `^(?s:.)$`, `^[a-zé]$`, `^a{1000}{1000}$`,
	} {
		if _, ok := compilePattern(p); ok {
			t.Errorf("%q must not be compiled to a DFA", p)
		}
	}
	for _, p := range []string{`^$`, `^a\z`, `\A[ab]+\z`, `^[a-z0-9][a-z0-9._-]{0,62}$`, `^[0-9]{1,6}(ms|s|m|h)$`, `(?i)^abc$`, `^[zZ]+$`} {
		if _, ok := compilePattern(p); !ok {
			t.Errorf("%q must be compiled to a DFA", p)
		}
	}
}

// FuzzPatternDFA: for any pattern compilePattern takes, the DFA and
// regexp.MatchString agree on any input.
func FuzzPatternDFA(f *testing.F) {
	for _, p := range []string{`^[a-z0-9][a-z0-9._-]{0,62}$`, `^[a-z0-9][a-z0-9._=/-]{0,62}$`,
		`^[0-9]{1,9}(\.[0-9]{1,9}){0,2}$`, `^[0-9]{1,6}(ms|s|m|h)$`, `^(a|ab)(c|bcd)(d*)$`, `^a{2,}b?$`} {
		for _, in := range []string{"", "a", "j-0001", "1.2.3", "10ms", "abcd", "aab", "\xff", "é"} {
			f.Add(p, in)
		}
	}
	f.Fuzz(func(t *testing.T, p, in string) {
		d, ok := compilePattern(p)
		if !ok {
			return
		}
		re := regexp.MustCompile(p)
		if got, want := d.Match(in), re.MatchString(in); got != want {
			t.Fatalf("pattern %q, input %q: DFA %v, regexp %v", p, in, got, want)
		}
	})
}

// TestEmittedMatchersAgreeWithRegexp compiles and runs the Go code the
// generator emits for random patterns (and the jobs schema's), checking it
// against regexp.MatchString on random inputs.
func TestEmittedMatchersAgreeWithRegexp(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the go tool")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var src, cases bytes.Buffer
	src.WriteString("package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n\t\"regexp\"\n)\n\n")
	cases.WriteString("var cases = []struct {\n\tre     *regexp.Regexp\n\tmatch  func(string) bool\n\tinputs []string\n}{\n")
	fixed := []string{`^[a-z0-9][a-z0-9._-]{0,62}$`, `^[a-z0-9][a-z0-9._=/-]{0,62}$`,
		`^[0-9]{1,9}(\.[0-9]{1,9}){0,2}$`, `^[0-9]{1,6}(ms|s|m|h)$`}
	n := 0
	for i := 0; n < 150; i++ {
		g := &patGen{rng: rng, alpha: alphabets[i%len(alphabets)]}
		p := g.pattern()
		if i < len(fixed) {
			p.src = fixed[i]
			re := regexp.MustCompile(p.src)
			p.sample = func(b *strings.Builder) {
				for _, s := range []string{"j-0001", "default", "zone=eu-1", "1.2", "1.2.3", "10ms", "5s"} {
					if re.MatchString(s) {
						b.WriteString(s)
						return
					}
				}
			}
		}
		d, ok := compilePattern(p.src)
		if !ok {
			continue
		}
		name := fmt.Sprintf("p%d", n)
		emitMatcher(&src, "match"+name, name, p.src, d)
		fmt.Fprintf(&cases, "\t{regexp.MustCompile(%s), match%s, []string{", strconv.Quote(p.src), name)
		for _, in := range g.inputs(p, 80) {
			cases.WriteString(strconv.Quote(in) + ", ")
		}
		cases.WriteString("}},\n")
		n++
	}
	cases.WriteString("}\n\n")
	src.Write(cases.Bytes())
	src.WriteString(`func main() {
	bad, total := 0, 0
	for _, c := range cases {
		for _, in := range c.inputs {
			total++
			if got, want := c.match(in), c.re.MatchString(in); got != want {
				bad++
				fmt.Printf("pattern %q, input %q: generated %v, regexp %v\n", c.re, in, got, want)
			}
		}
	}
	fmt.Printf("%d inputs\n", total)
	if bad > 0 {
		os.Exit(1)
	}
}
`)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module matchcheck\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), src.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "run", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("generated matchers disagree with regexp (or do not build): %v\n%s", err, out)
	}
	t.Logf("%s", bytes.TrimSpace(out))
}
