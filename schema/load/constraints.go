package load

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/token"

	"github.com/writ-dev/writ/schema/ir"
)

// A field's constraints read from its CUE conjuncts: bounds, lengths,
// patterns, enums and defaults, and the integer type they fit.

type bound struct {
	v    *big.Rat
	excl bool
	lit  string
}

func (x *bound) irBound() *ir.Bound {
	if x == nil {
		return nil
	}
	return &ir.Bound{Value: x.lit, Exclusive: x.excl}
}

// conjuncts flattens v's syntax into the list of &-conjuncts.
func conjuncts(n ast.Node) []ast.Expr {
	switch x := n.(type) {
	case *ast.File:
		var out []ast.Expr
		for _, d := range x.Decls {
			switch dd := d.(type) {
			case *ast.ImportDecl, *ast.LetClause, *ast.CommentGroup, *ast.Package, *ast.Attribute:
			case *ast.EmbedDecl:
				out = append(out, conjuncts(dd.Expr)...)
			default:
				return []ast.Expr{&ast.BadExpr{}}
			}
		}
		return out
	case *ast.ParenExpr:
		return conjuncts(x.X)
	case *ast.BinaryExpr:
		if x.Op == token.AND {
			return append(conjuncts(x.X), conjuncts(x.Y)...)
		}
		return []ast.Expr{x}
	case *ast.StructLit:
		// A struct holding only embedded expressions, e.g. {string}.
		var out []ast.Expr
		for _, el := range x.Elts {
			em, ok := el.(*ast.EmbedDecl)
			if !ok {
				return []ast.Expr{x}
			}
			out = append(out, conjuncts(em.Expr)...)
		}
		if len(out) == 0 {
			return []ast.Expr{x}
		}
		return out
	case ast.Expr:
		return []ast.Expr{x}
	}
	return nil
}

func nodeText(n ast.Node) string {
	b, err := format.Node(n)
	if err != nil {
		return fmt.Sprintf("%T", n)
	}
	return strings.TrimSpace(string(b))
}

var intTypes = map[string][2]string{
	"int":     {"", ""},
	"uint":    {"0", ""},
	"int8":    {"-128", "127"},
	"int16":   {"-32768", "32767"},
	"int32":   {"-2147483648", "2147483647"},
	"int64":   {"-9223372036854775808", "9223372036854775807"},
	"uint8":   {"0", "255"},
	"byte":    {"0", "255"},
	"uint16":  {"0", "65535"},
	"uint32":  {"0", "4294967295"},
	"rune":    {"0", "1114111"},
	"uint64":  {"0", "18446744073709551615"},
	"int128":  {"-170141183460469231731687303715884105728", "170141183460469231731687303715884105727"},
	"uint128": {"0", "340282366920938463463374607431768211455"},
}

func parseNum(lit string) (*big.Rat, bool) {
	var info literal.NumInfo
	if err := literal.ParseNum(lit, &info); err != nil {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(info.String())
	return r, ok
}

func tighten(lo, hi **bound, op token.Token, r *big.Rat, lit string) {
	nb := &bound{v: r, lit: lit}
	switch op {
	case token.GEQ, token.GTR:
		nb.excl = op == token.GTR
		if *lo == nil || r.Cmp((*lo).v) > 0 || (r.Cmp((*lo).v) == 0 && nb.excl) {
			*lo = nb
		}
	case token.LEQ, token.LSS:
		nb.excl = op == token.LSS
		if *hi == nil || r.Cmp((*hi).v) < 0 || (r.Cmp((*hi).v) == 0 && nb.excl) {
			*hi = nb
		}
	}
}

// plainTypes names the predeclared CUE type of each kind that has exactly
// one (an integer kind has sized types too: intTypes).
var plainTypes = map[ir.Kind]string{ir.KindString: "string", ir.KindBool: "bool", ir.KindFloat: "float", ir.KindNumber: "number"}

// conjunct applies one conjunct to f; false means an unsupported construct
// was reported.
func (b *builder) conjunct(path string, f *ir.Field, c ast.Expr, lo, hi **bound, isItems bool) bool {
	bad := func(what, fix string) bool {
		b.unsupported(f.Pos, path, fmt.Sprintf("%s: unsupported constraint %s (%s)", path, nodeText(c), what), fix)
		return false
	}
	switch x := c.(type) {
	case *ast.Ident:
		if name, ok := plainTypes[f.Kind]; ok && x.Name == name {
			return true
		}
		if r, ok := intTypes[x.Name]; ok && f.Kind == ir.KindInt {
			if r[0] != "" {
				v, _ := parseNum(r[0])
				tighten(lo, hi, token.GEQ, v, r[0])
			}
			if r[1] != "" {
				v, _ := parseNum(r[1])
				tighten(lo, hi, token.LEQ, v, r[1])
			}
			return true
		}
		return bad("identifier", "use a predeclared type such as string, int64, uint64, float or bool")
	case *ast.UnaryExpr:
		lit, ok := literalOf(x.X)
		if !ok {
			return bad("operand is not a literal", "write the bound or pattern as a literal")
		}
		switch x.Op {
		case token.MAT:
			if f.Kind != ir.KindString || lit.Kind != token.STRING {
				return bad("regexp on a non-string", "use =~ only on strings")
			}
			s, err := literal.Unquote(lit.Value)
			if err != nil {
				return bad("bad string literal", "fix the pattern literal")
			}
			f.Patterns = append(f.Patterns, s)
			return true
		case token.GEQ, token.GTR, token.LEQ, token.LSS:
			if f.Kind != ir.KindInt && f.Kind != ir.KindFloat && f.Kind != ir.KindNumber {
				return bad("bound on a non-number", "use bounds only on numbers")
			}
			r, ok := parseNum(lit.Value)
			if !ok {
				return bad("bad number literal", "write the bound as a decimal literal")
			}
			if f.Kind == ir.KindInt && !r.IsInt() {
				return bad("fractional bound on an integer", "use an integer bound")
			}
			tighten(lo, hi, x.Op, r, normLit(r, f.Kind))
			return true
		case token.MUL:
			return bad("default value", "remove the default (*); payloads carry every value explicitly")
		}
		return bad("operator "+x.Op.String(), "use =~, >=, >, <=, < or a disjunction of literals")
	case *ast.BasicLit:
		if f.Kind == ir.KindString && x.Kind == token.STRING {
			s, err := literal.Unquote(x.Value)
			if err != nil {
				return bad("bad string literal", "fix the literal")
			}
			f.Enum = intersectEnum(f.Enum, []string{s})
			return true
		}
		return bad("literal of a non-string type", "use bounds for numbers; literals only for string enums")
	case *ast.BinaryExpr:
		if x.Op == token.OR && hasDefault(x) {
			return bad("default value", "remove the default (*); payloads carry every value explicitly")
		}
		if x.Op == token.OR && f.Kind == ir.KindString {
			var vals []string
			if !orLits(x, &vals) {
				return bad("disjunction of non-literals", `write enums as "a" | "b" | "c"`)
			}
			if f.Enum == nil {
				f.Enum = vals
			} else {
				f.Enum = intersectEnum(f.Enum, vals)
			}
			return true
		}
		return bad("operator "+x.Op.String(), "use & of supported constraints or a disjunction of string literals")
	case *ast.CallExpr:
		sel, ok := x.Fun.(*ast.SelectorExpr)
		if !ok || len(x.Args) != 1 {
			return bad("call", "use strings.MinRunes/MaxRunes or list.MinItems/MaxItems")
		}
		pkg, _ := sel.X.(*ast.Ident)
		selName, _ := sel.Sel.(*ast.Ident)
		if pkg == nil || selName == nil {
			return bad("call", "use strings.MinRunes/MaxRunes or list.MinItems/MaxItems")
		}
		switch pkg.Name + "." + selName.Name {
		case "strings.MinRunes", "strings.MaxRunes", "list.MinItems", "list.MaxItems":
		default:
			return bad("function "+pkg.Name+"."+selName.Name+" is not compiled by the generator",
				"express the rule with =~, bounds, enums or strings.MinRunes/MaxRunes, list.MinItems/MaxItems")
		}
		lit, ok := x.Args[0].(*ast.BasicLit)
		if !ok || lit.Kind != token.INT {
			return bad("call", "use strings.MinRunes(N)/MaxRunes(N) or list.MinItems(N)/MaxItems(N) with a literal N")
		}
		n, err := strconv.Atoi(strings.ReplaceAll(lit.Value, "_", ""))
		if err != nil || n < 0 {
			return bad("bad count", "use a non-negative integer literal")
		}
		call := pkg.Name + "." + selName.Name
		switch {
		case f.Kind == ir.KindString && call == "strings.MinRunes", f.Kind == ir.KindList && call == "list.MinItems":
			if f.MinLen == nil || n > *f.MinLen {
				f.MinLen = &n
			}
			return true
		case f.Kind == ir.KindString && call == "strings.MaxRunes", f.Kind == ir.KindList && call == "list.MaxItems":
			if f.MaxLen == nil || n < *f.MaxLen {
				f.MaxLen = &n
			}
			return true
		}
		return bad("function "+call, "use strings.MinRunes/MaxRunes on strings or list.MinItems/MaxItems on lists")
	case *ast.ListLit:
		if f.Kind != ir.KindList {
			return bad("list literal", "declare lists as [...T]")
		}
		if len(x.Elts) != 1 {
			return bad("fixed list elements", "declare lists as [...T] with list.MinItems/MaxItems")
		}
		if _, ok := x.Elts[0].(*ast.Ellipsis); !ok {
			return bad("fixed list elements", "declare lists as [...T] with list.MinItems/MaxItems")
		}
		return true // the element is analysed through the value
	}
	return bad(fmt.Sprintf("%T", c), "use only types, bounds, =~ patterns, string enums and length limits")
}

// literalOf returns a literal operand, folding a sign into number literals.
func literalOf(e ast.Expr) (*ast.BasicLit, bool) {
	switch x := e.(type) {
	case *ast.BasicLit:
		return x, true
	case *ast.UnaryExpr:
		lit, ok := x.X.(*ast.BasicLit)
		if !ok || (x.Op != token.SUB && x.Op != token.ADD) || (lit.Kind != token.INT && lit.Kind != token.FLOAT) {
			return nil, false
		}
		v := lit.Value
		if x.Op == token.SUB {
			v = "-" + v
		}
		return &ast.BasicLit{Kind: lit.Kind, Value: v}, true
	}
	return nil, false
}

func normLit(r *big.Rat, k ir.Kind) string {
	if k == ir.KindInt {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func hasDefault(x ast.Expr) bool {
	switch y := x.(type) {
	case *ast.BinaryExpr:
		return y.Op == token.OR && (hasDefault(y.X) || hasDefault(y.Y))
	case *ast.ParenExpr:
		return hasDefault(y.X)
	case *ast.UnaryExpr:
		return y.Op == token.MUL
	}
	return false
}

func orLits(x ast.Expr, vals *[]string) bool {
	switch y := x.(type) {
	case *ast.BinaryExpr:
		if y.Op != token.OR {
			return false
		}
		return orLits(y.X, vals) && orLits(y.Y, vals)
	case *ast.ParenExpr:
		return orLits(y.X, vals)
	case *ast.BasicLit:
		if y.Kind != token.STRING {
			return false
		}
		s, err := literal.Unquote(y.Value)
		if err != nil {
			return false
		}
		*vals = append(*vals, s)
		return true
	}
	return false
}

func intersectEnum(a, b []string) []string {
	if a == nil {
		return b
	}
	out := []string{}
	for _, x := range a {
		for _, y := range b {
			if x == y {
				out = append(out, x)
			}
		}
	}
	return out
}

var (
	minInt64  = big.NewRat(-9223372036854775808, 1)
	maxInt64  = big.NewRat(9223372036854775807, 1)
	maxUint64 = new(big.Rat).SetInt(new(big.Int).SetUint64(18446744073709551615))
)

// intRange decides int64 vs uint64 and stores the bounds that are tighter
// than the Go type's own range (inclusive, normalized).
func (b *builder) intRange(path string, f *ir.Field, lo, hi *bound) {
	// Normalize exclusive integer bounds to inclusive ones.
	one := big.NewRat(1, 1)
	var l, h *big.Rat
	if lo != nil {
		l = new(big.Rat).Set(lo.v)
		if lo.excl {
			l.Add(l, one)
		}
	}
	if hi != nil {
		h = new(big.Rat).Set(hi.v)
		if hi.excl {
			h.Sub(h, one)
		}
	}
	switch {
	case l == nil || h == nil:
		b.unsupported(f.Pos, path, fmt.Sprintf("%s: integer without both bounds", path),
			"bound the integer (e.g. int & >=0 & <=1000) or use int64 or uint64")
		return
	case l.Cmp(minInt64) >= 0 && h.Cmp(maxInt64) <= 0:
		f.Kind = ir.KindInt
		if l.Cmp(minInt64) > 0 {
			f.Min = &ir.Bound{Value: l.Num().String()}
		}
		if h.Cmp(maxInt64) < 0 {
			f.Max = &ir.Bound{Value: h.Num().String()}
		}
	case l.Sign() >= 0 && h.Cmp(maxUint64) <= 0:
		f.Kind = ir.KindUint
		if l.Sign() > 0 {
			f.Min = &ir.Bound{Value: l.Num().String()}
		}
		if h.Cmp(maxUint64) < 0 {
			f.Max = &ir.Bound{Value: h.Num().String()}
		}
	default:
		b.unsupported(f.Pos, path, fmt.Sprintf("%s: integer range [%s, %s] fits neither int64 nor uint64", path, l.RatString(), h.RatString()),
			"narrow the range to int64 or uint64")
	}
}
