package conformance

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/writ-dev/writ/schema/ir"
)

// TestGeneratorDrawsValidEntries: for both example schemas the generator
// draws creations, requests and facts addressing the given instance, each
// valid by the catalog's own parser, facts carrying the given ID.
func TestGeneratorDrawsValidEntries(t *testing.T) {
	for _, dir := range []string{"../examples/jobs/schema", "../examples/leases/schema"} {
		g, err := NewGenerator(dir, 3)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		check := func(what string, d Drawn) {
			t.Helper()
			td, ok := g.Catalog().Type(d.Type)
			if !ok {
				t.Fatalf("%s: %s: undeclared type %s", dir, what, d.Type)
			}
			p, err := td.ParseJSON(d.Payload)
			if err != nil || p.InstanceKey() != "rk-1" || d.Instance != "rk-1" || d.Machine == "" {
				t.Fatalf("%s: %s %s %s: %v (instance %q)", dir, what, d.Type, d.Payload, err, d.Instance)
			}
		}
		cs := g.Creations("rk-1")
		if len(cs) == 0 {
			t.Fatalf("%s: no creations", dir)
		}
		for _, d := range cs {
			check("creation", d)
		}
		reqs, facts := 0, 0
		for i := 0; i < 50; i++ {
			if d, ok := g.Request("rk-1"); ok {
				check("request", d)
				reqs++
			}
			if d, ok := g.Fact("rk-1", "f-1", 1); ok {
				check("fact", d)
				if d.ID != "f-1" {
					t.Fatalf("%s: fact %s has ID %q, want f-1", dir, d.Type, d.ID)
				}
				facts++
			}
		}
		if reqs < 40 || facts < 40 {
			t.Fatalf("%s: drew only %d requests and %d facts of 50", dir, reqs, facts)
		}
	}
}

// TestGeneratorDrawsReceipts: for both example schemas the generator draws
// receipts with the given ID, valid by the catalog's parser, whose items
// are listed in order with their type, machine and instance, and which
// reach the maximum number of items the schema allows now and then.
func TestGeneratorDrawsReceipts(t *testing.T) {
	for _, c := range []struct {
		dir      string
		maxItems int
	}{{"../examples/jobs/schema", 512}, {"../examples/leases/schema", 256}} {
		g, err := NewGenerator(c.dir, 5)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		most := 0
		for i := 0; i < 60; i++ {
			d, items, ok := g.Receipt("rk-2", "r-1")
			if !ok {
				t.Fatalf("%s: no receipt drawn", c.dir)
			}
			td, _ := g.Catalog().Type(d.Type)
			p, err := td.ParseJSON(d.Payload)
			if err != nil || d.ID != "r-1" || p.IdempotencyKey() != "r-1" {
				t.Fatalf("%s: receipt %s %.200s: %v (ID %q)", c.dir, d.Type, d.Payload, err, d.ID)
			}
			its := p.Items()
			if len(items) != len(its) || len(items) == 0 {
				t.Fatalf("%s: %d drawn items for %d in the payload", c.dir, len(items), len(its))
			}
			for k, it := range items {
				if it.Type != its[k].EntryType() || it.Instance != its[k].InstanceKey() || it.Machine == "" {
					t.Fatalf("%s: item %d: %+v, payload item %s of %q", c.dir, k, it, its[k].EntryType(), its[k].InstanceKey())
				}
			}
			most = max(most, len(items))
		}
		if most != c.maxItems {
			t.Errorf("%s: the most items drawn in 60 receipts is %d, want the schema's maximum %d", c.dir, most, c.maxItems)
		}
	}
}

// TestGeneratorLargestCreations: the largest creations are valid creating
// requests of inst with every optional field present; in the narrow ones
// (one-byte runes) every top-level string with a maximum length is at that
// maximum.
func TestGeneratorLargestCreations(t *testing.T) {
	for _, dir := range []string{"../examples/jobs/schema", "../examples/leases/schema"} {
		g, err := NewGenerator(dir, 11)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		narrow, wide := g.LargestCreations("rk-1", false), g.LargestCreations("rk-1", true)
		if len(narrow) == 0 || len(narrow) != len(wide) {
			t.Fatalf("%s: %d narrow and %d wide largest creations", dir, len(narrow), len(wide))
		}
		atMax := 0
		for i, d := range narrow {
			td, _ := g.Catalog().Type(d.Type)
			for _, x := range []Drawn{d, wide[i]} {
				p, err := td.ParseJSON(x.Payload)
				if err != nil || p.InstanceKey() != "rk-1" || !td.Machine.IsInitial(p.TargetState()) {
					t.Fatalf("%s: largest %s is not a creation of rk-1: %v", dir, x.Type, err)
				}
			}
			var obj map[string]any
			if err := json.Unmarshal(d.Payload, &obj); err != nil {
				t.Fatal(err)
			}
			for _, f := range td.Entry.Fields {
				v, present := obj[f.Name]
				if !present {
					t.Errorf("%s: largest %s has no %s (optional fields are drawn too)", dir, d.Type, f.Name)
					continue
				}
				if s, ok := v.(string); ok && f.Kind == ir.KindString && f.MaxLen != nil {
					if n := utf8.RuneCountInString(s); n != *f.MaxLen {
						t.Errorf("%s: largest %s.%s has %d runes, the schema's maximum is %d", dir, d.Type, f.Name, n, *f.MaxLen)
					}
					atMax++
				}
			}
		}
		if atMax == 0 {
			t.Errorf("%s: no bounded string in any creating type: the test checked nothing", dir)
		}
	}
}
