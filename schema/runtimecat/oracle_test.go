package runtimecat_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/schema/gen"
	"github.com/writ-dev/writ/schema/ir"
	"github.com/writ-dev/writ/schema/load"
	"github.com/writ-dev/writ/schema/runtimecat"
	"github.com/writ-dev/writ/schema/runtimecat/internal/rolloutgen"
)

func loadSchema(t testing.TB, dir string) *load.Result {
	t.Helper()
	res, err := load.Dir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed() {
		t.Fatal(res.Err())
	}
	return res
}

func newRuntime(t testing.TB, s *ir.Schema) ir.Catalog {
	t.Helper()
	cat, err := runtimecat.New(s)
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// tally counts the payloads an oracle run checked.
type tally struct{ total, valid, atMax int }

// oracle draws payloads for every entry type and checks that the runtime
// catalog, the generated catalog and CUE give the same verdict, that the
// two catalogs give the same error, and that accepted payloads encode,
// render and route identically.
func oracle(t *testing.T, res *load.Result, gen ir.Catalog, perType int) tally {
	rt := newRuntime(t, res.Schema)
	if rt.Fingerprint() != gen.Fingerprint() || rt.Fingerprint() != res.Schema.Fingerprint() {
		t.Fatalf("fingerprints differ: runtime %s, generated %s, schema %s (regenerate)", rt.Fingerprint(), gen.Fingerprint(), res.Schema.Fingerprint())
	}
	var n tally
	rapid.Check(t, func(rt2 *rapid.T) {
		for _, e := range res.Schema.Entries {
			for range perType {
				d := &drawer{t: rt2, s: res.Schema, max: rapid.IntRange(0, 7).Draw(rt2, "max") == 0}
				o := d.object(e.Fields, e.Name)
				cueOK := true
				mutation := rapid.IntRange(0, 9).Draw(rt2, "mutate")
				var b strings.Builder
				switch {
				case mutation < 5:
					cueOK = d.mutate(o, e.Fields, e.Name)
					encode(o, &b)
				case mutation == 5:
					encode(o, &b)
					s := b.String()
					b.Reset()
					b.WriteString(s[:rapid.IntRange(0, len(s)-1).Draw(rt2, "cut")])
				case mutation == 6:
					b.WriteString(rapid.SampledFrom([]string{"[]", `"x"`, "1", "null", "", " ", "{} {}", "{,}"}).Draw(rt2, "not an object"))
				default:
					b.WriteString(" \n")
					encode(o, &b)
					b.WriteString("\t")
				}
				data := []byte(b.String())
				if compare(t, rt, gen, res, e.Name, data, cueOK) {
					n.valid++
					if d.max {
						n.atMax++
					}
				}
				n.total++
			}
		}
	})
	t.Logf("%d payloads, %d valid (%d at maximum sizes), %d invalid", n.total, n.valid, n.atMax, n.total-n.valid)
	if n.total < 2000 || n.valid < n.total/5 || n.total-n.valid < n.total/5 || n.atMax == 0 {
		t.Fatalf("oracle coverage too thin: %+v", n)
	}
	return n
}

// compare checks one payload; it reports whether it was accepted.
func compare(t *testing.T, rt, gen ir.Catalog, res *load.Result, typ string, data []byte, cueOK bool) bool {
	t.Helper()
	rd, _ := rt.Type(typ)
	gd, _ := gen.Type(typ)
	rp, rerr := rd.ParseJSON(data)
	gp, gerr := gd.ParseJSON(data)
	if (rerr == nil) != (gerr == nil) || (rerr != nil && !reflect.DeepEqual(rerr, gerr)) {
		t.Fatalf("%s: runtime and generated disagree on %.2000s\nruntime:   %v\ngenerated: %v", typ, data, rerr, gerr)
	}
	if rerr != nil {
		var fe *ir.FieldError
		if !asFieldError(rerr, &fe) {
			t.Fatalf("%s: runtime error is %T, not *ir.FieldError: %v", typ, rerr, rerr)
		}
	}
	if cueOK {
		cerr := res.CheckPayloadJSON(typ, data)
		if (cerr == nil) != (rerr == nil) {
			t.Fatalf("%s: catalogs and CUE disagree on %.2000s\ncatalogs: %v\ncue: %v", typ, data, rerr, cerr)
		}
	}
	if rerr != nil {
		return false
	}
	samePayload(t, typ, rp, gp)
	// Binary round trip through both catalogs.
	bin, _ := rp.AppendBinary(nil)
	rq, err := rd.ParseBinary(bin)
	if err != nil {
		t.Fatalf("%s: runtime ParseBinary of its own encoding: %v", typ, err)
	}
	gq, err := gd.ParseBinary(bin)
	if err != nil {
		t.Fatalf("%s: generated ParseBinary of the runtime encoding: %v", typ, err)
	}
	samePayload(t, typ, rq, gq)
	samePayload(t, typ, rq, rp)
	// A damaged encoding fails identically in both.
	if len(bin) > 0 {
		for _, cut := range []int{len(bin) - 1, len(bin) / 2} {
			_, re := rd.ParseBinary(bin[:cut])
			_, ge := gd.ParseBinary(bin[:cut])
			if !reflect.DeepEqual(re, ge) {
				t.Fatalf("%s: truncated binary: runtime %v, generated %v", typ, re, ge)
			}
		}
		_, re := rd.ParseBinary(append(bin[:len(bin):len(bin)], 0))
		_, ge := gd.ParseBinary(append(bin[:len(bin):len(bin)], 0))
		if re == nil || !reflect.DeepEqual(re, ge) {
			t.Fatalf("%s: trailing byte: runtime %v, generated %v", typ, re, ge)
		}
	}
	return true
}

func asFieldError(err error, fe **ir.FieldError) bool {
	x, ok := err.(*ir.FieldError)
	*fe = x
	return ok
}

// samePayload checks that two payloads are indistinguishable through
// ir.Payload and JSON.
func samePayload(t *testing.T, typ string, a, b ir.Payload) {
	t.Helper()
	if a.EntryType() != b.EntryType() {
		t.Fatalf("%s: EntryType %q vs %q", typ, a.EntryType(), b.EntryType())
	}
	ab, _ := a.AppendBinary([]byte{7})
	bb, _ := b.AppendBinary([]byte{7})
	if !bytes.Equal(ab, bb) {
		t.Fatalf("%s: binary encodings differ:\n%x\n%x", typ, ab, bb)
	}
	aj, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	bj, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(aj, bj) {
		t.Fatalf("%s: JSON renderings differ:\n%s\n%s", typ, aj, bj)
	}
	if !reflect.DeepEqual(a.Keys(), b.Keys()) || a.InstanceKey() != b.InstanceKey() || a.TargetState() != b.TargetState() || a.IdempotencyKey() != b.IdempotencyKey() {
		t.Fatalf("%s: routing differs: keys %q/%q instance %q/%q target %q/%q id %q/%q", typ, a.Keys(), b.Keys(), a.InstanceKey(), b.InstanceKey(), a.TargetState(), b.TargetState(), a.IdempotencyKey(), b.IdempotencyKey())
	}
	ao, aok := a.Order()
	bo, bok := b.Order()
	if ao != bo || aok != bok {
		t.Fatalf("%s: Order %d,%v vs %d,%v", typ, ao, aok, bo, bok)
	}
	if a.Validate() != nil || b.Validate() != nil {
		t.Fatalf("%s: a parsed payload fails Validate: %v / %v", typ, a.Validate(), b.Validate())
	}
	ai, bi := a.Items(), b.Items()
	if len(ai) != len(bi) || (ai == nil) != (bi == nil) {
		t.Fatalf("%s: %d items vs %d", typ, len(ai), len(bi))
	}
	for i := range ai {
		samePayload(t, typ+" item", ai[i], bi[i])
	}
}

func TestOracleJobs(t *testing.T) {
	res := loadSchema(t, "../../examples/jobs/schema")
	oracle(t, res, jobsgen.Catalog(), 2)
}

func TestOracleRollout(t *testing.T) {
	res := loadSchema(t, rolloutDir)
	oracle(t, res, rolloutgen.Catalog(), 5)
}

const rolloutDir = "testdata/rollout"

// TestRolloutGenIsFresh: the generated side of the rollout oracle must be
// what writ gen makes of the schema today.
func TestRolloutGenIsFresh(t *testing.T) {
	res := loadSchema(t, rolloutDir)
	files, err := gen.Generate(res.Schema, gen.Options{Package: "rolloutgen", Source: rolloutDir})
	if err != nil {
		t.Fatal(err)
	}
	diff, err := gen.Check("internal/rolloutgen", files)
	if err != nil {
		t.Fatal(err)
	}
	if diff != "" {
		t.Fatalf("internal/rolloutgen is stale (fix: in schema/runtimecat run go run ../../cmd/writ gen --schema %s --out internal/rolloutgen):\n%s", rolloutDir, diff)
	}
}
