package conformance

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/writ-dev/writ/schema/ir"
)

// drawer draws payloads from a schema's field model: valid ones built to
// satisfy every constraint, and mutated ones that break one.
type drawer struct {
	rng *rand.Rand
	s   *ir.Schema
	// ids is a small pool of identifier-like values so that drawn payloads
	// collide on keys (the same job, worker or queue) often.
	pool []string
	// maxOut draws every bounded string and list at its maximum size.
	maxOut maxMode
}

func newDrawer(s *ir.Schema, seed uint64, salt uint64) *drawer {
	return &drawer{rng: rand.New(rand.NewPCG(seed, salt)), s: s}
}

// object draws a valid payload for fields.
func (d *drawer) object(fs []*ir.Field) map[string]any {
	obj := map[string]any{}
	for _, f := range fs {
		// at maximum size every optional field is present too
		if f.Optional && d.rng.IntN(2) == 0 && d.maxOut == maxOff {
			continue
		}
		obj[f.Name] = d.value(f)
	}
	return obj
}

func (d *drawer) value(f *ir.Field) any {
	switch f.Kind {
	case ir.KindString:
		return d.str(f)
	case ir.KindInt, ir.KindUint:
		return d.integer(f)
	case ir.KindFloat, ir.KindNumber:
		return d.float(f)
	case ir.KindBool:
		return d.rng.IntN(2) == 0
	case ir.KindList:
		n := d.listLen(f)
		out := make([]any, n)
		for i := range out {
			switch {
			case f.ItemType != "":
				if en, ok := d.s.Entry(f.ItemType); ok {
					out[i] = d.object(en.Fields)
				}
			case f.Elem != nil:
				out[i] = d.value(f.Elem)
			}
		}
		return out
	case ir.KindStruct:
		return d.object(f.Fields)
	}
	return nil
}

func (d *drawer) str(f *ir.Field) string {
	if len(f.Enum) > 0 {
		return f.Enum[d.rng.IntN(len(f.Enum))]
	}
	lo, hi := 0, 24
	if f.MinLen != nil {
		lo = *f.MinLen
	}
	if f.MaxLen != nil {
		hi = *f.MaxLen
	}
	for try := 0; try < 20; try++ {
		var s string
		if len(f.Patterns) > 0 {
			if len(d.pool) > 0 && d.rng.IntN(8) > 0 {
				s = d.pool[d.rng.IntN(len(d.pool))]
			} else {
				s = d.fromPattern(f.Patterns[0])
			}
		} else {
			s = d.plainField(lo, hi, f.MaxLen != nil)
		}
		if n := utf8.RuneCountInString(s); n < lo || n > hi || !matchAll(f.Patterns, s) {
			continue
		}
		return s
	}
	// Could not satisfy the constraints by drawing; return something and
	// let the oracle decide (the case then counts as an invalid one).
	return d.plain(lo)
}

func matchAll(patterns []string, s string) bool {
	for _, p := range patterns {
		if !mustRE(p).MatchString(s) {
			return false
		}
	}
	return true
}

func (d *drawer) plain(n int) string {
	const alpha = "abcdefghijklmnopqrstuvwxyz0123456789 -_.é"
	r := []rune(alpha)
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteRune(r[d.rng.IntN(len(r))])
	}
	return b.String()
}

// fromPattern draws a string matching an RE2 pattern.
func (d *drawer) fromPattern(p string) string {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return ""
	}
	var b strings.Builder
	d.gen(&b, re.Simplify())
	return b.String()
}

func (d *drawer) gen(b *strings.Builder, re *syntax.Regexp) {
	switch re.Op {
	case syntax.OpLiteral:
		b.WriteString(string(re.Rune))
	case syntax.OpCharClass:
		// Pick a range, then a rune inside it; keep to printable ASCII
		// where the class allows.
		if len(re.Rune) == 0 {
			return
		}
		i := d.rng.IntN(len(re.Rune)/2) * 2
		lo, hi := re.Rune[i], re.Rune[i+1]
		if hi > 0x7e && lo <= 0x7e {
			hi = 0x7e
		}
		if hi-lo > 0x10000 {
			hi = lo + 0x100
		}
		b.WriteRune(lo + rune(d.rng.IntN(int(hi-lo)+1)))
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		b.WriteByte(byte('a' + d.rng.IntN(26)))
	case syntax.OpCapture:
		d.gen(b, re.Sub[0])
	case syntax.OpConcat:
		for _, s := range re.Sub {
			d.gen(b, s)
		}
	case syntax.OpAlternate:
		d.gen(b, re.Sub[d.rng.IntN(len(re.Sub))])
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		lo, hi := 0, 4
		switch re.Op {
		case syntax.OpPlus:
			lo = 1
		case syntax.OpQuest:
			hi = 1
		case syntax.OpRepeat:
			lo, hi = re.Min, re.Max
			if hi < 0 {
				hi = lo + 4
			}
		}
		// Prefer short strings (bounded identifiers stay readable), but
		// reach a bounded repeat's maximum too.
		n := lo + d.rng.IntN(hi-lo+1)
		switch k := d.rng.IntN(8); {
		case k == 0 && re.Max >= 0:
			n = hi
		case k > 1 && hi-lo > 8:
			n = lo + d.rng.IntN(9)
		}
		for i := 0; i < n; i++ {
			d.gen(b, re.Sub[0])
		}
	}
}

// bounds returns a field's integer range as big ints.
func intBounds(f *ir.Field) (*big.Int, *big.Int) {
	lo, hi := big.NewInt(math.MinInt64), big.NewInt(math.MaxInt64)
	if f.Kind == ir.KindUint {
		lo = big.NewInt(0)
		hi = new(big.Int).SetUint64(math.MaxUint64)
	}
	if f.Min != nil {
		if v, ok := new(big.Int).SetString(f.Min.Value, 10); ok {
			if f.Min.Exclusive {
				v.Add(v, big.NewInt(1))
			}
			lo = v
		}
	}
	if f.Max != nil {
		if v, ok := new(big.Int).SetString(f.Max.Value, 10); ok {
			if f.Max.Exclusive {
				v.Sub(v, big.NewInt(1))
			}
			hi = v
		}
	}
	return lo, hi
}

// integer draws an integer inside the field's range, preferring edges.
func (d *drawer) integer(f *ir.Field) jsonNumber {
	lo, hi := intBounds(f)
	span := new(big.Int).Sub(hi, lo)
	var v *big.Int
	switch d.rng.IntN(6) {
	case 0:
		v = lo
	case 1:
		v = hi
	case 2, 3:
		// small values near the low edge
		v = new(big.Int).Add(lo, big.NewInt(int64(d.rng.IntN(10))))
		if v.Cmp(hi) > 0 {
			v = hi
		}
	default:
		if span.Sign() <= 0 {
			v = lo
		} else {
			r := d.randBelowOrEq(span)
			v = r.Add(r, lo)
		}
	}
	return jsonNumber(v.String())
}

func (d *drawer) float(f *ir.Field) jsonNumber {
	lo, hi := -1e6, 1e6
	if f.Min != nil {
		if v, err := strconv.ParseFloat(f.Min.Value, 64); err == nil {
			lo = v
		}
	}
	if f.Max != nil {
		if v, err := strconv.ParseFloat(f.Max.Value, 64); err == nil {
			hi = v
		}
	}
	v := lo + d.rng.Float64()*(hi-lo)
	switch d.rng.IntN(6) {
	case 0:
		if f.Min != nil && !f.Min.Exclusive {
			v = lo
		}
	case 1:
		if f.Max != nil && !f.Max.Exclusive {
			v = hi
		}
	}
	s := strconv.FormatFloat(v, 'f', 3, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return jsonNumber(s)
}

// jsonNumber is a number literal marshalled verbatim (so uint64 and big
// values survive).
type jsonNumber string

func (n jsonNumber) MarshalJSON() ([]byte, error) { return []byte(n), nil }

var reCache sync.Map

// mustRE compiles a pattern the loader already accepted.
func mustRE(p string) *regexp.Regexp {
	if re, ok := reCache.Load(p); ok {
		return re.(*regexp.Regexp)
	}
	re, err := regexp.Compile(p)
	if err != nil {
		re = regexp.MustCompile("$^") // matches nothing: the oracle decides
	}
	reCache.Store(p, re)
	return re
}

// randBelowOrEq draws uniformly from [0, span] for span < 2^64.
func (d *drawer) randBelowOrEq(span *big.Int) *big.Int {
	if !span.IsUint64() {
		return new(big.Int).SetUint64(d.rng.Uint64())
	}
	u := span.Uint64()
	if u == math.MaxUint64 {
		return new(big.Int).SetUint64(d.rng.Uint64())
	}
	return new(big.Int).SetUint64(d.rng.Uint64N(u + 1))
}

// mutate breaks one constraint of a valid payload (it may, by chance,
// produce a still-valid payload; the oracle decides). It returns what it
// did, for messages.
func (d *drawer) mutate(obj map[string]any, fs []*ir.Field) string {
	if len(fs) == 0 {
		obj["unexpected"] = 1
		return "added unknown field unexpected"
	}
	f := fs[d.rng.IntN(len(fs))]
	switch d.rng.IntN(8) {
	case 0:
		delete(obj, f.Name)
		return "removed " + f.Name
	case 1:
		obj["zz_unknown"] = "x"
		return "added unknown field zz_unknown"
	case 2:
		obj[f.Name] = nil
		return f.Name + " = null"
	case 3:
		if f.Kind == ir.KindString {
			obj[f.Name] = 7
		} else {
			obj[f.Name] = "7"
		}
		return f.Name + " has the wrong JSON type"
	}
	switch f.Kind {
	case ir.KindString:
		switch d.rng.IntN(3) {
		case 0:
			obj[f.Name] = ""
		case 1:
			obj[f.Name] = "UPPER case!" + d.plain(d.rng.IntN(3))
		default:
			n := 70
			if f.MaxLen != nil {
				n = *f.MaxLen + 1
			}
			obj[f.Name] = strings.Repeat("a", n)
		}
		return f.Name + " breaks its string constraint"
	case ir.KindInt, ir.KindUint:
		lo, hi := intBounds(f)
		if d.rng.IntN(2) == 0 {
			obj[f.Name] = jsonNumber(new(big.Int).Sub(lo, big.NewInt(1)).String())
		} else {
			obj[f.Name] = jsonNumber(new(big.Int).Add(hi, big.NewInt(1)).String())
		}
		return f.Name + " is out of range"
	case ir.KindList:
		if l, ok := obj[f.Name].([]any); ok && len(l) > 0 {
			if m, ok := l[0].(map[string]any); ok {
				if en, ok := d.s.Entry(f.ItemType); ok {
					return f.Name + "[0]: " + d.mutate(m, en.Fields)
				}
			}
			l[0] = map[string]any{"bad": true}
			return f.Name + "[0] is malformed"
		}
		obj[f.Name] = []any{}
		return f.Name + " is empty"
	case ir.KindStruct:
		if m, ok := obj[f.Name].(map[string]any); ok {
			return f.Name + "." + d.mutate(m, f.Fields)
		}
	}
	obj[f.Name] = true
	return fmt.Sprintf("%s = true", f.Name)
}
