package gen

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/writ-dev/writ/schema/patterndfa"
)

// dfa is a pattern's DFA (schema/patterndfa); compilePattern and compileDFA
// are patterndfa.Compile and patterndfa.CompileSized.
type dfa = patterndfa.DFA

func compilePattern(p string) (*dfa, bool)      { return patterndfa.Compile(p) }
func compileDFA(p string) (d *dfa, tooBig bool) { return patterndfa.CompileSized(p) }

// emitMatcher writes the Go matcher func name(s string) bool for pattern p
// compiled to d, with its tables prefixed by tab.
func emitMatcher(b *bytes.Buffer, name, tab, p string, d *dfa) {
	st := "uint8"
	if len(d.Next) > 256 {
		st = "uint16"
	}
	fmt.Fprintf(b, "// %s reports whether s matches the pattern\n//\n//\t%s\n//\n", name, goQuote(p))
	b.WriteString("// exactly as regexp.MatchString does, with a DFA over bytes compiled from\n")
	b.WriteString("// the pattern by writ gen (the pattern matches ASCII only, so any other\n")
	b.WriteString("// byte leads to the dead state 0).\n")
	fmt.Fprintf(b, "func %s(s string) bool {\n\tst := %s(1)\n", name, st)
	fmt.Fprintf(b, "\tfor i := 0; i < len(s); i++ {\n\t\tst = %sNext[st][%sClass[s[i]]]\n\t\tif st == 0 {\n\t\t\treturn false\n\t\t}\n\t}\n", tab, tab)
	fmt.Fprintf(b, "\treturn %sAccept[st]\n}\n\n", tab)

	fmt.Fprintf(b, "// %sClass maps a byte to its class (0: matched nowhere in the pattern).\nvar %sClass = [256]uint8{", tab, tab)
	n := 0
	for c := 0; c < 256; c++ {
		if d.Class[c] == 0 {
			continue
		}
		if n%8 == 0 {
			b.WriteString("\n\t")
		} else {
			b.WriteString(" ")
		}
		n++
		fmt.Fprintf(b, "%s: %d,", byteLit(byte(c)), d.Class[c])
	}
	b.WriteString("\n}\n\n")

	fmt.Fprintf(b, "// %sNext is the transition table: state × class → state.\nvar %sNext = [%d][%d]%s{\n", tab, tab, len(d.Next), d.NClass, st)
	for _, row := range d.Next {
		parts := make([]string, len(row))
		for i, v := range row {
			parts[i] = strconv.Itoa(v)
		}
		fmt.Fprintf(b, "\t{%s},\n", strings.Join(parts, ", "))
	}
	b.WriteString("}\n\n")
	fmt.Fprintf(b, "// %sAccept marks the accepting states.\nvar %sAccept = [%d]bool{", tab, tab, len(d.Accept))
	n = 0
	for i, a := range d.Accept {
		if !a {
			continue
		}
		if n%8 == 0 {
			b.WriteString("\n\t")
		} else {
			b.WriteString(" ")
		}
		n++
		fmt.Fprintf(b, "%d: true,", i)
	}
	b.WriteString("\n}\n\n")
}

// byteLit is the Go literal of a byte: a quoted character when printable.
func byteLit(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("0x%02x", c)
}
