package runtimecat

import "github.com/writ-dev/writ/schema/patterndfa"

// compilePattern is the DFA compiler writ gen runs at generation time
// (schema/patterndfa), so a pattern is decided by the same DFA (or by
// regexp) in both catalogs.
func compilePattern(p string) (*patterndfa.DFA, bool) { return patterndfa.Compile(p) }
