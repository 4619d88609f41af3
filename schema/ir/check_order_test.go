package ir

import (
	"strings"
	"testing"
)

// scopedSample is sample() with order epochs: m.set opens an epoch named
// by its field "by", and m.seen reports within the epoch its "by" names.
func scopedSample() *Schema {
	s := sample()
	s.Entries[0].OrderScope = "by"
	s.Entries[0].Fields = append(s.Entries[0].Fields, &Field{Name: "by", Kind: KindString})
	s.Entries[1].OrderScope = "by"
	s.Entries[1].Fields = append(s.Entries[1].Fields, &Field{Name: "by", Kind: KindString})
	return s
}

func TestCheckOrderScopes(t *testing.T) {
	if fs := scopedSample().Check(); len(fs) != 0 {
		t.Fatalf("consistent order epochs have findings: %v", fs)
	}
	if !scopedSample().Entries[0].OpensEpoch() || scopedSample().Entries[1].OpensEpoch() {
		t.Fatal("OpensEpoch: an entry with order_scope and no order opens, one with order does not")
	}
	findings := func(s *Schema) string {
		var out []string
		for _, f := range s.Check() {
			out = append(out, string(f.Status)+" "+f.Code+": "+f.Msg+" / fix: "+f.Fix)
		}
		return strings.Join(out, "\n")
	}
	third := func(s *Schema, scope string) {
		s.Entries = append(s.Entries, &Entry{Name: "m.also", Number: 3, Class: ClassFact, Machine: "m", ToState: "B", ID: "rid", Order: "seq",
			OrderScope: scope, Keys: []string{"m/{id}"},
			Fields: []*Field{{Name: "rid", Kind: KindString}, {Name: "id", Kind: KindString}, {Name: "seq", Kind: KindUint}, {Name: "by", Kind: KindString}}})
	}
	for name, tc := range map[string]struct {
		edit func(*Schema)
		want []string
	}{
		"unknown field":  {func(s *Schema) { s.Entries[1].OrderScope = "who" }, []string{"BLOCKED WRIT_UNKNOWN_FIELD", `order_scope names field "who"`}},
		"optional field": {func(s *Schema) { s.Entries[1].Fields[3].Optional = true }, []string{"BLOCKED WRIT_BAD_FIELD_TYPE", "make payload.by required"}},
		"list field":     {func(s *Schema) { s.Entries[1].Fields[3].Kind = KindBool }, []string{"BLOCKED WRIT_BAD_FIELD_TYPE", "a string or an integer"}},
		"no machine": {func(s *Schema) {
			s.Entries[1].Machine, s.Entries[1].ToState = "", ""
		}, []string{"BLOCKED WRIT_ORDER_SCOPE_UNUSED", "remove order_scope"}},
		"no target": {func(s *Schema) { s.Entries[1].ToState = "" }, []string{"BLOCKED WRIT_ORDER_SCOPE_UNUSED"}},
		"mixed":     {func(s *Schema) { third(s, "") }, []string{"BLOCKED WRIT_ORDER_SCOPE_MIXED", "declare order_scope on m.also too"}},
		"no opener": {func(s *Schema) { s.Entries[0].OrderScope = "" }, []string{"INCOMPLETE WRIT_NO_EPOCH_OPENER",
			"declare order_scope (without order) on the entry type that starts a new attempt"}},
		"unscoped reports": {func(s *Schema) { s.Entries[1].OrderScope = "" }, []string{"REVIEW_REQUIRED WRIT_ORDER_SCOPE_MIXED",
			"declare order_scope on m.seen"}},
		"scoped too": {func(s *Schema) { third(s, "by") }, nil},
	} {
		s := scopedSample()
		tc.edit(s)
		got := findings(s)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: want %q in\n%s", name, w, got)
			}
		}
		if tc.want == nil && got != "" {
			t.Errorf("%s: want no findings, got\n%s", name, got)
		}
	}
}

func TestOrderScopeInFingerprintAndDiff(t *testing.T) {
	a, b := sample(), scopedSample()
	if a.Fingerprint() == b.Fingerprint() {
		t.Fatal("order_scope does not change the fingerprint")
	}
	var found bool
	for _, f := range Diff(a, b) {
		if f.Code == CodeCompatRoutingChanged && strings.Contains(f.Msg, "order_scope") {
			found = true
		}
	}
	if !found {
		t.Fatalf("schema diff does not report order_scope as a routing change: %v", Diff(a, b))
	}
}
