package runtimecat_test

import (
	"strings"
	"testing"

	"github.com/writ-dev/writ/schema/ir"
	"github.com/writ-dev/writ/schema/runtimecat"
)

// model is a one-type schema whose single field f the cases vary.
func model(f *ir.Field, class ir.Class) *ir.Schema {
	return &ir.Schema{Entries: []*ir.Entry{{
		Name: "thing.put", Number: 1, Class: class, Keys: []string{"thing/{id}"},
		Fields: []*ir.Field{{Name: "id", Kind: ir.KindString}, f},
	}}}
}

func TestNewRefusesBrokenModels(t *testing.T) {
	for name, c := range map[string]struct {
		s    *ir.Schema
		want []string
	}{
		"nil":          {nil, []string{"no schema"}},
		"unclassified": {model(&ir.Field{Name: "n", Kind: ir.KindBool}, ir.ClassUnknown), []string{"WRIT_UNCLASSIFIED_TYPE", "thing.put"}},
		"bad pattern":  {model(&ir.Field{Name: "p", Kind: ir.KindString, Patterns: []string{"(["}}, ir.ClassRequest), []string{"WRIT_BAD_FIELD_TYPE", "does not compile"}},
		"int bound":    {model(&ir.Field{Name: "n", Kind: ir.KindInt, Min: &ir.Bound{Value: "0.5"}}, ir.ClassRequest), []string{"thing.put.n", ">=0.5", "int64"}},
		"uint bound":   {model(&ir.Field{Name: "n", Kind: ir.KindUint, Max: &ir.Bound{Value: "-1"}}, ir.ClassRequest), []string{"thing.put.n", "uint64"}},
		"no kind":      {model(&ir.Field{Name: "n"}, ir.ClassRequest), []string{"WRIT_BAD_FIELD_TYPE", "without a type"}},
	} {
		_, err := runtimecat.New(c.s)
		if err == nil {
			t.Errorf("%s: New accepted the model", name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) || !strings.HasPrefix(err.Error(), "runtimecat: ") {
				t.Errorf("%s: error %q does not name %q", name, err, w)
			}
		}
	}
}

// TestNewServesTheSchema: the catalog's tables are the schema's.
func TestNewServesTheSchema(t *testing.T) {
	res := loadSchema(t, rolloutDir)
	cat := newRuntime(t, res.Schema)
	if cat.Schema() != res.Schema || cat.Fingerprint() != res.Schema.Fingerprint() {
		t.Fatal("catalog does not serve the schema it was built from")
	}
	types := cat.Types()
	if len(types) != len(res.Schema.Entries) {
		t.Fatalf("%d types, schema has %d", len(types), len(res.Schema.Entries))
	}
	for i, d := range types {
		e := res.Schema.Entries[i]
		byName, ok1 := cat.Type(e.Name)
		byNum, ok2 := cat.TypeByNumber(e.Number)
		if !ok1 || !ok2 || byName != d || byNum != d || d.Entry != e || d.Class != e.Class || d.Number != e.Number {
			t.Fatalf("%s: lookups disagree", e.Name)
		}
		if (e.Machine == "") != (d.Machine == nil) || (d.Machine != nil && d.Machine.Name != e.Machine) {
			t.Fatalf("%s: machine %v, want %q", e.Name, d.Machine, e.Machine)
		}
	}
	if _, ok := cat.Type("rollout.nope"); ok {
		t.Fatal("an undeclared type was found")
	}
	if _, ok := cat.TypeByNumber(99); ok {
		t.Fatal("an unused type number was found")
	}
	if m, ok := cat.Machine("rollout"); !ok || !m.Allowed("ROLLED_BACK", "PLANNED") {
		t.Fatal("machine rollout missing or without its cycle")
	}
	// Types returns a copy: callers cannot reorder the catalog.
	types[0] = nil
	if cat.Types()[0] == nil {
		t.Fatal("Types exposes the catalog's own slice")
	}
}
