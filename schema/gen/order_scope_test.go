package gen

import (
	"bytes"
	"go/parser"
	"go/token"
	"testing"

	"github.com/writ-dev/writ/schema/ir"
)

// TestGenerateOrderScope: a type with order_scope gets an OrderScope
// accessor (integers in decimal) and the catalog declares the field; a
// type without it gets neither, and a field named order_scope does not
// collide with the accessor.
func TestGenerateOrderScope(t *testing.T) {
	s := &ir.Schema{
		Machines: []*ir.Machine{{Name: "m", Key: "id", States: []string{"A", "B"}, Initial: []string{"A"}, Terminal: []string{},
			Transitions: map[string][]string{"A": {"B"}, "B": {"A"}}}},
		Entries: []*ir.Entry{
			{Name: "m.open", Number: 1, Class: ir.ClassRequest, Machine: "m", ToState: "A", OrderScope: "attempt", Keys: []string{"m/{id}"},
				Fields: []*ir.Field{{Name: "id", Kind: ir.KindString}, {Name: "attempt", Kind: ir.KindUint, Min: &ir.Bound{Value: "0"}, Max: &ir.Bound{Value: "1000"}}}},
			{Name: "m.seen", Number: 2, Class: ir.ClassFact, Machine: "m", ToState: "B", ID: "rid", Order: "seq", OrderScope: "attempt", Keys: []string{"m/{id}"},
				Fields: []*ir.Field{{Name: "rid", Kind: ir.KindString}, {Name: "id", Kind: ir.KindString}, {Name: "seq", Kind: ir.KindUint},
					{Name: "attempt", Kind: ir.KindInt, Min: &ir.Bound{Value: "-5"}, Max: &ir.Bound{Value: "1000"}}}},
			{Name: "m.note", Number: 3, Class: ir.ClassRequest, Machine: "m", Keys: []string{"m/{id}"},
				Fields: []*ir.Field{{Name: "id", Kind: ir.KindString}, {Name: "order_scope", Kind: ir.KindString}}},
		},
	}
	files, err := Generate(s, Options{Package: "p"})
	if err != nil {
		t.Fatal(err)
	}
	all := bytes.Join([][]byte{files["payloads_gen.go"], files["catalog_gen.go"]}, nil)
	for _, want := range []string{
		"func (p *MOpen) OrderScope() string { return strconv.FormatUint(p.Attempt, 10) }",
		"func (p *MSeen) OrderScope() string { return strconv.FormatInt(p.Attempt, 10) }",
		`OrderScope: "attempt",`,
		"OrderScopeField string",
	} {
		if !bytes.Contains(all, []byte(want)) {
			t.Errorf("generated code lacks %q", want)
		}
	}
	if bytes.Contains(all, []byte("func (p *MNote) OrderScope()")) {
		t.Error("a type without order_scope got an OrderScope accessor")
	}
	for name, src := range files {
		if _, err := parser.ParseFile(token.NewFileSet(), name, src, 0); err != nil {
			t.Fatalf("%s does not parse: %v", name, err)
		}
	}
}
