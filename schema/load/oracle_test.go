package load

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	cuejson "cuelang.org/go/encoding/json"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/schema/ir"
)

// TestOracleGeneratedValidateAgreesWithCUE draws random payloads per entry
// type (valid ones and ones with a mutation: missing or unknown field,
// out-of-range number, pattern/enum/length violation, wrong JSON type,
// null) and checks that the generated ParseJSON (decode + Validate) and
// CUE's own evaluation of the declared payload give the same verdict.
func TestOracleGeneratedValidateAgreesWithCUE(t *testing.T) {
	res, err := Dir("../../examples/jobs/schema")
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed() {
		t.Fatal(res.Err())
	}
	cat := jobsgen.Catalog()
	if cat.Fingerprint() != res.Schema.Fingerprint() {
		t.Fatal("generated jobsgen is stale: run make gen")
	}
	ctx := cuecontext.New()
	// A fixed seed keeps CI deterministic; WRITTEST_ORACLE_SEED explores others.
	seed := uint64(1)
	if s := os.Getenv("WRITTEST_ORACLE_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("WRITTEST_ORACLE_SEED: %v", err)
		}
		seed = v
	}
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, uint64(len(res.Schema.Entries))))
	const perType = 200
	total, valid := 0, 0
	for _, e := range res.Schema.Entries {
		pv, err := res.PayloadValue(e.Name)
		if err != nil {
			t.Fatal(err)
		}
		desc, ok := cat.Type(e.Name)
		if !ok {
			t.Fatalf("%s missing from the catalog", e.Name)
		}
		for i := 0; i < perType; i++ {
			g := &drawer{rng: rng, s: res.Schema}
			obj := g.object(e.Fields)
			if rng.IntN(2) == 0 {
				g.mutate(obj, e.Fields)
			}
			data, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			_, genErr := desc.ParseJSON(data)
			expr, err := cuejson.Extract("payload.json", data)
			if err != nil {
				t.Fatalf("extract: %v", err)
			}
			cueErr := pv.Unify(ctx.BuildExpr(expr)).Validate(cue.Concrete(true), cue.Final())
			if (genErr == nil) != (cueErr == nil) {
				t.Fatalf("%s: verdicts differ for %s\ngenerated: %v\ncue: %v", e.Name, data, genErr, cueErr)
			}
			total++
			if genErr == nil {
				valid++
			}
		}
	}
	t.Logf("%d payloads, %d valid, %d invalid", total, valid, total-valid)
	if total < 2000 || valid < total/5 || total-valid < total/5 {
		t.Fatalf("oracle coverage too thin: %d payloads, %d valid", total, valid)
	}
}

type drawer struct {
	rng *rand.Rand
	s   *ir.Schema
}

var goodStrings = []string{"j1", "a", "default", "x.y-z_1", "w-07", "5s", "250ms", "12m", "1", "1.2", "1.2.3", "gpu", "zone=eu-1", "echo hi"}

func (g *drawer) randString() string {
	const alpha = "abcdefghijklmnopqrstuvwxyz0123456789._-=/ AZé"
	n := g.rng.IntN(12)
	if g.rng.IntN(20) == 0 {
		n = 60 + g.rng.IntN(10)
	}
	var b strings.Builder
	for i := 0; i < n; i++ {
		r := []rune(alpha)
		b.WriteRune(r[g.rng.IntN(len(r))])
	}
	return b.String()
}

func (g *drawer) object(fs []*ir.Field) map[string]any {
	obj := map[string]any{}
	for _, f := range fs {
		if f.Optional && g.rng.IntN(2) == 0 {
			continue
		}
		obj[f.Name] = g.value(f)
	}
	return obj
}

func bigOf(s string) *big.Int {
	v, _ := new(big.Int).SetString(s, 10)
	return v
}

func (g *drawer) value(f *ir.Field) any {
	switch f.Kind {
	case ir.KindString:
		if len(f.Enum) > 0 {
			return f.Enum[g.rng.IntN(len(f.Enum))]
		}
		if f.MinLen != nil && len(f.Patterns) == 0 {
			return "cmd " + g.randString()
		}
		for range 20 {
			s := goodStrings[g.rng.IntN(len(goodStrings))]
			if ok := matchesAll(f, s); ok {
				return s
			}
		}
		return goodStrings[0]
	case ir.KindInt, ir.KindUint:
		lo, hi := big.NewInt(math.MinInt64), big.NewInt(math.MaxInt64)
		if f.Kind == ir.KindUint {
			lo, hi = big.NewInt(0), new(big.Int).SetUint64(math.MaxUint64)
		}
		if f.Min != nil {
			lo = bigOf(f.Min.Value)
		}
		if f.Max != nil {
			hi = bigOf(f.Max.Value)
		}
		span := new(big.Int).Sub(hi, lo)
		r := new(big.Int).SetUint64(g.rng.Uint64())
		r.Mod(r, new(big.Int).Add(span, big.NewInt(1)))
		return json.Number(r.Add(r, lo).String())
	case ir.KindFloat, ir.KindNumber:
		return json.Number(fmt.Sprintf("%.3f", g.rng.Float64()*100))
	case ir.KindBool:
		return g.rng.IntN(2) == 0
	case ir.KindStruct:
		return g.object(f.Fields)
	case ir.KindList:
		n := 0
		if f.MinLen != nil {
			n = *f.MinLen
		}
		n += g.rng.IntN(3)
		out := []any{}
		for i := 0; i < n; i++ {
			if f.ItemType != "" {
				it, _ := g.s.Entry(f.ItemType)
				out = append(out, g.object(it.Fields))
			} else {
				out = append(out, g.value(f.Elem))
			}
		}
		return out
	}
	return nil
}

// mutate applies one random change that may (or may not) make obj invalid.
func (g *drawer) mutate(obj map[string]any, fs []*ir.Field) {
	f := fs[g.rng.IntN(len(fs))]
	switch g.rng.IntN(9) {
	case 8:
		g.boundary(obj, f)
	case 0:
		delete(obj, f.Name)
	case 1:
		obj["unexpected_"+f.Name] = 1
	case 2:
		obj[f.Name] = nil
	case 3:
		obj[f.Name] = g.randString()
	case 4:
		obj[f.Name] = json.Number(fmt.Sprint(g.rng.Int64N(4000) - 2000))
	case 5:
		obj[f.Name] = json.Number("1.5")
	case 6:
		switch f.Kind {
		case ir.KindInt, ir.KindUint:
			if f.Max != nil {
				obj[f.Name] = json.Number(new(big.Int).Add(bigOf(f.Max.Value), big.NewInt(1)).String())
			} else if f.Kind == ir.KindUint {
				obj[f.Name] = json.Number("18446744073709551616")
			}
			if f.Min != nil && g.rng.IntN(2) == 0 {
				obj[f.Name] = json.Number(new(big.Int).Sub(bigOf(f.Min.Value), big.NewInt(1)).String())
			}
		case ir.KindString:
			obj[f.Name] = strings.Repeat("x", 70+g.rng.IntN(5000))
		case ir.KindList:
			obj[f.Name] = []any{}
		case ir.KindStruct:
			sub, _ := obj[f.Name].(map[string]any)
			if sub != nil && len(f.Fields) > 0 {
				g.mutate(sub, f.Fields)
			}
		}
	case 7:
		if f.Kind == ir.KindList && f.ItemType != "" {
			if l, ok := obj[f.Name].([]any); ok && len(l) > 0 {
				it, _ := g.s.Entry(f.ItemType)
				if m, ok := l[0].(map[string]any); ok {
					g.mutate(m, it.Fields)
				}
			}
		} else {
			obj[f.Name] = []any{"x"}
		}
	}
}

func matchesAll(f *ir.Field, s string) bool {
	for _, p := range f.Patterns {
		if !regexpCache(p).MatchString(s) {
			return false
		}
	}
	return true
}

// boundary sets a field exactly at, or one past, a declared limit.
func (g *drawer) boundary(obj map[string]any, f *ir.Field) {
	past := g.rng.IntN(2) == 0
	switch f.Kind {
	case ir.KindInt, ir.KindUint:
		bd, delta := f.Max, int64(1)
		if bd == nil || (f.Min != nil && g.rng.IntN(2) == 0) {
			bd, delta = f.Min, -1
		}
		if bd == nil {
			return
		}
		v := bigOf(bd.Value)
		if past {
			v.Add(v, big.NewInt(delta))
		}
		obj[f.Name] = json.Number(v.String())
	case ir.KindString:
		if f.MaxLen == nil || len(f.Patterns) > 0 || len(f.Enum) > 0 {
			return
		}
		n := *f.MaxLen
		if past {
			n++
		}
		obj[f.Name] = strings.Repeat("é", n) // multi-byte: runes, not bytes, count
	case ir.KindList:
		if f.MaxLen == nil {
			return
		}
		n := *f.MaxLen
		if past {
			n++
		}
		l := make([]any, n)
		for i := range l {
			if f.ItemType != "" {
				it, _ := g.s.Entry(f.ItemType)
				l[i] = g.object(it.Fields)
			} else {
				l[i] = g.value(f.Elem)
			}
		}
		obj[f.Name] = l
	}
}
