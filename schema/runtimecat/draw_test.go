package runtimecat_test

import (
	"encoding/json"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"pgregory.net/rapid"

	"github.com/writ-dev/writ/schema/ir"
)

// The drawer builds random JSON payloads for an entry type: mostly valid
// ones, some at the maximum sizes the schema allows, and (through mutate)
// ones broken in one place. The verdict is never predicted here: the test
// asks CUE, and the catalogs must agree with it and with each other.

// jv is a JSON value under construction: *jobj, []jv, or raw (a literal).
type jv any

type raw string

type member struct {
	key string
	val jv
}

type jobj struct{ members []member }

func (o *jobj) get(k string) (jv, int) {
	for i, m := range o.members {
		if m.key == k {
			return m.val, i
		}
	}
	return nil, -1
}

func encode(v jv, b *strings.Builder) {
	switch x := v.(type) {
	case *jobj:
		b.WriteByte('{')
		for i, m := range x.members {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(quote(m.key))
			b.WriteByte(':')
			encode(m.val, b)
		}
		b.WriteByte('}')
	case []jv:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			encode(e, b)
		}
		b.WriteByte(']')
	case raw:
		b.WriteString(string(x))
	default:
		b.WriteString("null")
	}
}

func quote(s string) string {
	q, _ := json.Marshal(s)
	return string(q)
}

var reCache sync.Map

// grown caches the longest value found per field: growing is slow and the
// maximum does not depend on the draw.
var grown sync.Map

func compiled(p string) *regexp.Regexp {
	if r, ok := reCache.Load(p); ok {
		return r.(*regexp.Regexp)
	}
	r := regexp.MustCompile(p)
	reCache.Store(p, r)
	return r
}

func matchesAll(f *ir.Field, s string) bool {
	for _, p := range f.Patterns {
		if !compiled(p).MatchString(s) {
			return false
		}
	}
	return true
}

type drawer struct {
	t   *rapid.T
	s   *ir.Schema
	max bool // every optional field present, strings and lists at their maximum
}

func (d *drawer) object(fs []*ir.Field, label string) *jobj {
	o := &jobj{}
	for _, f := range fs {
		if f.Optional && !d.max && rapid.Bool().Draw(d.t, label+"."+f.Name+"?") {
			continue
		}
		o.members = append(o.members, member{f.Name, d.value(f, label+"."+f.Name)})
	}
	if len(o.members) > 1 && rapid.IntRange(0, 3).Draw(d.t, label+" reorder") == 0 {
		perm := rapid.Permutation(o.members).Draw(d.t, label+" order")
		o.members = perm
	}
	return o
}

var plainRunes = []rune("abcdefghijklmnopqrstuvwxyz0123456789._-=/ AZé\u00e9\u4e16\U0001F642\"\\\n<&")

func (d *drawer) str(f *ir.Field, label string) string {
	switch {
	case len(f.Enum) > 0:
		return rapid.SampledFrom(f.Enum).Draw(d.t, label)
	case len(f.Patterns) > 0:
		s := rapid.StringMatching(f.Patterns[0]).Draw(d.t, label)
		if d.max {
			if g, ok := grown.Load(f); ok {
				return g.(string)
			}
			s = grow(f, s)
			grown.Store(f, s)
		}
		return s
	}
	lo, hi := 0, 24
	if f.MinLen != nil {
		lo = *f.MinLen
	}
	if f.MaxLen != nil && *f.MaxLen < hi {
		hi = *f.MaxLen
	}
	if hi < lo {
		hi = lo
	}
	if d.max {
		n := 4096
		if f.MaxLen != nil {
			n = *f.MaxLen
		}
		// Multi-byte runes: limits count runes, not bytes.
		return strings.Repeat("é", n/2) + strings.Repeat("🙂", n-n/2)
	}
	n := rapid.IntRange(lo, hi).Draw(d.t, label+" len")
	return string(rapid.SliceOfN(rapid.SampledFrom(plainRunes), n, n).Draw(d.t, label))
}

// grow lengthens a matching string one character at a time while it still
// matches and stays within the length limit: the longest value the
// pattern admits, found greedily.
func grow(f *ir.Field, s string) string {
	limit := 4096
	if f.MaxLen != nil {
		limit = *f.MaxLen
	}
	const alphabet = "a0z9._-=/"
	for len([]rune(s)) < limit {
		grown := false
		for _, c := range alphabet {
			for _, cand := range []string{s + string(c), string(c) + s} {
				if matchesAll(f, cand) {
					s, grown = cand, true
					break
				}
			}
			if grown {
				break
			}
		}
		if !grown {
			break
		}
	}
	return s
}

func intRange(f *ir.Field) (*big.Int, *big.Int) {
	lo, hi := big.NewInt(math.MinInt64), big.NewInt(math.MaxInt64)
	if f.Kind == ir.KindUint {
		lo, hi = big.NewInt(0), new(big.Int).SetUint64(math.MaxUint64)
	}
	if f.Min != nil {
		lo, _ = new(big.Int).SetString(f.Min.Value, 10)
		if f.Min.Exclusive {
			lo.Add(lo, big.NewInt(1))
		}
	}
	if f.Max != nil {
		hi, _ = new(big.Int).SetString(f.Max.Value, 10)
		if f.Max.Exclusive {
			hi.Sub(hi, big.NewInt(1))
		}
	}
	return lo, hi
}

func (d *drawer) number(f *ir.Field, label string) raw {
	switch f.Kind {
	case ir.KindInt, ir.KindUint:
		lo, hi := intRange(f)
		switch rapid.IntRange(0, 5).Draw(d.t, label+" at") {
		case 0:
			return raw(lo.String())
		case 1:
			return raw(hi.String())
		}
		span := new(big.Int).Sub(hi, lo)
		r := new(big.Int).SetUint64(rapid.Uint64().Draw(d.t, label))
		r.Mod(r, span.Add(span, big.NewInt(1)))
		return raw(r.Add(r, lo).String())
	}
	lo, hi := -1e6, 1e6
	if f.Min != nil {
		lo, _ = strconv.ParseFloat(f.Min.Value, 64)
	}
	if f.Max != nil {
		hi, _ = strconv.ParseFloat(f.Max.Value, 64)
	}
	x := rapid.Float64Range(lo, hi).Draw(d.t, label)
	s := strconv.FormatFloat(x, 'f', -1, 64)
	if rapid.IntRange(0, 3).Draw(d.t, label+" exp") == 0 {
		s = strconv.FormatFloat(x, 'e', -1, 64)
	}
	if f.Kind == ir.KindFloat && !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return raw(s)
}

func (d *drawer) value(f *ir.Field, label string) jv {
	switch f.Kind {
	case ir.KindString:
		return raw(quote(d.str(f, label)))
	case ir.KindInt, ir.KindUint, ir.KindFloat, ir.KindNumber:
		return d.number(f, label)
	case ir.KindBool:
		return raw(strconv.FormatBool(rapid.Bool().Draw(d.t, label)))
	case ir.KindStruct:
		return d.object(f.Fields, label)
	case ir.KindList:
		lo, hi := 0, 3
		if f.MinLen != nil {
			lo = *f.MinLen
			hi = lo + 3
		}
		if f.MaxLen != nil && *f.MaxLen < hi {
			hi = *f.MaxLen
		}
		n := rapid.IntRange(lo, hi).Draw(d.t, label+" n")
		if d.max {
			n = 64
			if f.MaxLen != nil {
				n = *f.MaxLen
			}
		}
		out := make([]jv, n)
		for i := range out {
			out[i] = d.elem(f, label+"[]")
		}
		return out
	}
	return raw("null")
}

func (d *drawer) elem(f *ir.Field, label string) jv {
	if f.ItemType != "" {
		it, _ := d.s.Entry(f.ItemType)
		return d.object(it.Fields, label)
	}
	return d.value(f.Elem, label)
}

// mutate breaks (or, by chance, keeps valid) one spot of o. It reports
// whether CUE's verdict is still comparable: duplicate keys, which CUE
// unifies, are not.
func (d *drawer) mutate(o *jobj, fs []*ir.Field, label string) (cueComparable bool) {
	if len(fs) == 0 {
		o.members = append(o.members, member{"unexpected", raw("1")})
		return true
	}
	f := rapid.SampledFrom(fs).Draw(d.t, label+" field")
	cur, at := o.get(f.Name)
	set := func(v jv) {
		if at < 0 {
			o.members = append(o.members, member{f.Name, v})
		} else {
			o.members[at].val = v
		}
	}
	// Descend into a nested object, an item or a list element.
	if cur != nil && rapid.IntRange(0, 2).Draw(d.t, label+" descend") == 0 {
		switch x := cur.(type) {
		case *jobj:
			if f.Kind == ir.KindStruct {
				return d.mutate(x, f.Fields, label+"."+f.Name)
			}
		case []jv:
			if len(x) > 0 {
				i := rapid.IntRange(0, len(x)-1).Draw(d.t, label+" index")
				switch {
				case f.ItemType != "":
					it, _ := d.s.Entry(f.ItemType)
					if eo, ok := x[i].(*jobj); ok {
						return d.mutate(eo, it.Fields, label+"."+f.Name+"[]")
					}
				case f.Elem.Kind == ir.KindStruct:
					if eo, ok := x[i].(*jobj); ok {
						return d.mutate(eo, f.Elem.Fields, label+"."+f.Name+"[]")
					}
				default:
					x[i] = d.badScalar(f.Elem, label+"[]")
					return true
				}
			}
		}
	}
	switch rapid.IntRange(0, 7).Draw(d.t, label+" mutation") {
	case 0:
		if at >= 0 {
			o.members = append(o.members[:at], o.members[at+1:]...)
		}
	case 1:
		o.members = append(o.members, member{"unexpected_" + f.Name, raw("1")})
	case 2:
		set(raw(rapid.SampledFrom([]string{"null", `"x"`, "1", "1.5", "true", "{}", "[]", `[1]`, `[{}]`}).Draw(d.t, label+" wrong")))
	case 3, 4:
		set(d.badScalar(f, label))
	case 5:
		if f.Kind == ir.KindList {
			n := 0
			switch rapid.IntRange(0, 2).Draw(d.t, label+" count") {
			case 0:
				if f.MaxLen != nil {
					n = *f.MaxLen + 1
				}
			case 1:
				if f.MinLen != nil && *f.MinLen > 0 {
					n = *f.MinLen - 1
				}
			default:
				n = 1
			}
			l := make([]jv, n)
			for i := range l {
				l[i] = d.elem(f, label+"[]")
			}
			set(l)
		} else {
			set(d.badScalar(f, label))
		}
	case 6:
		if at >= 0 {
			o.members = append(o.members, member{f.Name, o.members[at].val})
			return false
		}
	case 7:
		set(d.value(f, label))
	}
	return true
}

// badScalar is a value at or just past a limit of f, or of the wrong kind.
func (d *drawer) badScalar(f *ir.Field, label string) jv {
	switch f.Kind {
	case ir.KindInt, ir.KindUint:
		lo, hi := intRange(f)
		one := big.NewInt(1)
		return raw(rapid.SampledFrom([]string{
			new(big.Int).Sub(lo, one).String(), new(big.Int).Add(hi, one).String(), lo.String(), hi.String(),
			"-0", "9223372036854775808", "-9223372036854775809", "18446744073709551616", "1e2", "1.0", "-1",
		}).Draw(d.t, label+" int"))
	case ir.KindFloat, ir.KindNumber:
		cands := []string{"0", "1", "-1", "0.5", "1e-7", "-2.5e3", "1.0"}
		for _, b := range []*ir.Bound{f.Min, f.Max} {
			if b != nil {
				cands = append(cands, b.Value, b.Value+".0", b.Value+"e0")
			}
		}
		return raw(rapid.SampledFrom(cands).Draw(d.t, label+" float"))
	case ir.KindString:
		n := 0
		if f.MaxLen != nil {
			n = *f.MaxLen + rapid.IntRange(0, 1).Draw(d.t, label+" past")
		} else if f.MinLen != nil && *f.MinLen > 0 {
			n = *f.MinLen - 1
		}
		cands := []string{strings.Repeat("é", n), strings.Repeat("x", n), "", "UPPER", "a b", "-lead", strings.Repeat("a", 63), strings.Repeat("a", 64), "\u00e9t\u00e9", "1.2.3", "5s", "0ms", "1234567s"}
		for _, e := range f.Enum {
			cands = append(cands, strings.ToUpper(e), e+" ")
		}
		return raw(quote(rapid.SampledFrom(cands).Draw(d.t, label+" str")))
	case ir.KindBool:
		return raw(rapid.SampledFrom([]string{"0", `"true"`, "null"}).Draw(d.t, label+" bool"))
	}
	return raw(rapid.SampledFrom([]string{"null", `"x"`, "{}"}).Draw(d.t, label+" other"))
}
