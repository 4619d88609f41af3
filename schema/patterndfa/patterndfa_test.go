package patterndfa

import (
	"regexp"
	"testing"
)

// TestCompileDecidesAsRegexp: a pattern Compile takes is decided as
// regexp.MatchString decides it; one it does not take (unanchored,
// non-ASCII, a backreference-free shape it does not model) is refused. The
// random and fuzzed comparison lives with the generator
// (schema/gen/pattern_test.go), which emits these DFAs as code.
func TestCompileDecidesAsRegexp(t *testing.T) {
	inputs := []string{"", "a", "ab", "abc", "a-1", "Z9", "aaaa", "a\xff", "é", "ab_"}
	for _, p := range []string{`^[a-z]+$`, `^a(b|c)*$`, `^[A-Z][0-9]?$`, `^(ab){2,3}$`, `^[a-z]+-[0-9]+$`} {
		d, ok := Compile(p)
		if !ok {
			t.Fatalf("Compile(%q) refused a supported pattern", p)
		}
		re := regexp.MustCompile(p)
		for _, in := range inputs {
			if got, want := d.Match(in), re.MatchString(in); got != want {
				t.Errorf("%q on %q: DFA %t, regexp %t", p, in, got, want)
			}
		}
	}
	for _, p := range []string{`[a-z]+`, `^é$`, `^a`, `^(?i)a$x`} {
		if _, ok := Compile(p); ok {
			t.Errorf("Compile(%q) took an unsupported pattern", p)
		}
	}
}
