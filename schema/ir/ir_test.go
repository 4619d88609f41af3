package ir

import (
	"strings"
	"testing"
)

func sample() *Schema {
	one := 1
	return &Schema{
		Entries: []*Entry{
			{Name: "m.set", Number: 1, Class: ClassRequest, Machine: "m", To: "state", Keys: []string{"m/{id}"},
				Pos: Pos{File: "a.cue", Line: 3, Col: 2},
				Fields: []*Field{
					{Name: "id", Kind: KindString, MinLen: &one, Pos: Pos{File: "a.cue", Line: 4, Col: 3}},
					{Name: "state", Kind: KindString, Enum: []string{"A", "B"}},
				}},
			{Name: "m.seen", Number: 2, Class: ClassFact, Machine: "m", ToState: "B", ID: "rid", Order: "seq", Keys: []string{"m/{id}"},
				Fields: []*Field{
					{Name: "rid", Kind: KindString},
					{Name: "id", Kind: KindString},
					{Name: "seq", Kind: KindUint},
				}},
		},
		Machines: []*Machine{{Name: "m", Key: "id", States: []string{"A", "B"}, Initial: []string{"A"}, Terminal: []string{"B"},
			Transitions: map[string][]string{"A": {"B"}}}},
	}
}

func TestFingerprintIgnoresPositionsAndDocs(t *testing.T) {
	a, b := sample(), sample()
	b.Entries[0].Pos = Pos{File: "other.cue", Line: 99, Col: 1}
	b.Entries[0].Fields[0].Pos = Pos{}
	b.Entries[0].Doc = "reworded"
	b.Entries[0].Fields[0].Doc = "reworded"
	if a.Fingerprint() != b.Fingerprint() {
		t.Fatal("positions or docs changed the fingerprint")
	}
	if !strings.HasPrefix(a.Fingerprint(), "sha256:") || len(a.Fingerprint()) != 7+64 {
		t.Fatalf("fingerprint format: %s", a.Fingerprint())
	}
}

func TestFingerprintSeesBehaviour(t *testing.T) {
	base := sample().Fingerprint()
	for name, edit := range map[string]func(*Schema){
		"class":      func(s *Schema) { s.Entries[0].Class = ClassFact },
		"number":     func(s *Schema) { s.Entries[1].Number = 3 },
		"bound":      func(s *Schema) { two := 2; s.Entries[0].Fields[0].MinLen = &two },
		"enum":       func(s *Schema) { s.Entries[0].Fields[1].Enum = []string{"A"} },
		"optional":   func(s *Schema) { s.Entries[0].Fields[1].Optional = true },
		"transition": func(s *Schema) { s.Machines[0].Transitions["B"] = []string{"A"} },
		"key":        func(s *Schema) { s.Entries[0].Keys = []string{"n/{id}"} },
		"to":         func(s *Schema) { s.Entries[1].ToState = "A" },
	} {
		s := sample()
		edit(s)
		if s.Fingerprint() == base {
			t.Errorf("%s: change did not alter the fingerprint", name)
		}
	}
}

func TestCheck(t *testing.T) {
	if fs := sample().Check(); len(fs) != 0 {
		t.Fatalf("clean sample has findings: %v", fs)
	}
	codes := func(s *Schema) string {
		var out []string
		for _, f := range s.Check() {
			out = append(out, string(f.Status)+" "+f.Code)
		}
		return strings.Join(out, ",")
	}
	for name, tc := range map[string]struct {
		edit func(*Schema)
		want string
	}{
		"unclassified":  {func(s *Schema) { s.Entries[0].Class = ClassUnknown }, "BLOCKED WRIT_UNCLASSIFIED_TYPE"},
		"duplicate":     {func(s *Schema) { s.Entries[1].Number = 1 }, "BLOCKED WRIT_DUPLICATE_TYPE_NUMBER"},
		"fact no id":    {func(s *Schema) { s.Entries[1].ID = "" }, "INCOMPLETE WRIT_FACT_WITHOUT_ID"},
		"unknown state": {func(s *Schema) { s.Entries[1].ToState = "Z" }, "BLOCKED WRIT_GUARD_UNKNOWN_STATE"},
		"enum state":    {func(s *Schema) { s.Entries[0].Fields[1].Enum = []string{"A", "Q"} }, "BLOCKED WRIT_GUARD_UNKNOWN_STATE"},
		"terminal exit": {func(s *Schema) { s.Machines[0].Transitions["B"] = []string{"A"} }, "BLOCKED WRIT_TERMINAL_HAS_EXIT"},
		"unreachable":   {func(s *Schema) { s.Machines[0].States = append(s.Machines[0].States, "C") }, "REVIEW_REQUIRED WRIT_UNREACHABLE_STATE"},
		"machine":       {func(s *Schema) { s.Entries[0].Machine = "nope" }, "BLOCKED WRIT_UNKNOWN_MACHINE"},
		"key field":     {func(s *Schema) { s.Entries[0].Keys = []string{"m/{nope}"} }, "BLOCKED WRIT_UNKNOWN_FIELD"},
		"order type":    {func(s *Schema) { s.Entries[1].Fields[2].Kind = KindString }, "BLOCKED WRIT_BAD_FIELD_TYPE"},
		"receipt":       {func(s *Schema) { s.Entries[0].Class = ClassReceipt }, "INCOMPLETE WRIT_BAD_ITEMS"},
		"bad pattern":   {func(s *Schema) { s.Entries[0].Fields[0].Patterns = []string{"("} }, "BLOCKED WRIT_BAD_FIELD_TYPE"},
		"list no elem":  {func(s *Schema) { s.Entries[1].Fields = append(s.Entries[1].Fields, &Field{Name: "l", Kind: KindList}) }, "BLOCKED WRIT_BAD_FIELD_TYPE"},
		"no kind":       {func(s *Schema) { s.Entries[1].Fields = append(s.Entries[1].Fields, &Field{Name: "x"}) }, "BLOCKED WRIT_BAD_FIELD_TYPE"},
		"no creator":    {func(s *Schema) { s.Entries[0].Fields[1].Enum = []string{"B"} }, "INCOMPLETE WRIT_NO_CREATOR"},
		"not targeted": {func(s *Schema) {
			s.Entries[0].Fields[1].Enum = []string{"A"}
			s.Entries[1].ToState = "A"
		}, "REVIEW_REQUIRED WRIT_STATE_NOT_TARGETED"},
	} {
		s := sample()
		tc.edit(s)
		got := codes(s)
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s: want %s in %q", name, tc.want, got)
		}
		if strings.HasPrefix(tc.want, "BLOCKED") || strings.HasPrefix(tc.want, "INCOMPLETE") {
			if !AnyFails(s.Check()) {
				t.Errorf("%s: AnyFails=false", name)
			}
		}
	}
}

func TestEntryTarget(t *testing.T) {
	e := &Entry{To: "action", ToMap: map[string]string{"cancel": "CANCELLED"}}
	if st, ok := e.Target("cancel"); !ok || st != "CANCELLED" {
		t.Fatal(st, ok)
	}
	if _, ok := e.Target("dance"); ok {
		t.Fatal("unmapped value has a target")
	}
	if st, _ := (&Entry{ToState: "PENDING"}).Target(""); st != "PENDING" {
		t.Fatal(st)
	}
	if st, _ := (&Entry{To: "state"}).Target("RUNNING"); st != "RUNNING" {
		t.Fatal(st)
	}
}
