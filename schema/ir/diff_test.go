package ir

import (
	"strings"
	"testing"
)

func TestDiff(t *testing.T) {
	if fs := Diff(sample(), sample()); len(fs) != 0 {
		t.Fatalf("identical schemas differ: %v", fs)
	}
	for name, tc := range map[string]struct {
		edit func(*Schema)
		want string
	}{
		"type removed":   {func(s *Schema) { s.Entries = s.Entries[:1] }, "BLOCKED WRIT_COMPAT_TYPE_REMOVED"},
		"type added":     {func(s *Schema) { s.Entries = append(s.Entries, &Entry{Name: "m.new", Number: 9, Class: ClassRequest}) }, "REVIEW_REQUIRED WRIT_COMPAT_TYPE_ADDED"},
		"number reused":  {func(s *Schema) { s.Entries[1].Name = "m.other" }, "BLOCKED WRIT_COMPAT_NUMBER_REUSED"},
		"number changed": {func(s *Schema) { s.Entries[1].Number = 7 }, "BLOCKED WRIT_COMPAT_NUMBER_CHANGED"},
		"class":          {func(s *Schema) { s.Entries[0].Class = ClassFact }, "BLOCKED WRIT_COMPAT_CLASS_CHANGED"},
		"routing":        {func(s *Schema) { s.Entries[1].Order = "" }, "BLOCKED WRIT_COMPAT_ROUTING_CHANGED"},
		"layout":         {func(s *Schema) { s.Entries[0].Fields[1].Optional = true }, "BLOCKED WRIT_COMPAT_ENCODING_CHANGED"},
		"field order": {func(s *Schema) {
			f := s.Entries[0].Fields
			f[0], f[1] = f[1], f[0]
		}, "BLOCKED WRIT_COMPAT_ENCODING_CHANGED"},
		"tightened":       {func(s *Schema) { two := 2; s.Entries[0].Fields[0].MinLen = &two }, "minimum length 1 → 2 (tightened)"},
		"loosened":        {func(s *Schema) { s.Entries[0].Fields[0].MinLen = nil }, "minimum length 1 → none (loosened)"},
		"enum":            {func(s *Schema) { s.Entries[0].Fields[1].Enum = []string{"A"} }, "(tightened)"},
		"state removed":   {func(s *Schema) { s.Machines[0].States = []string{"A"} }, "BLOCKED WRIT_COMPAT_STATE_REMOVED"},
		"state added":     {func(s *Schema) { s.Machines[0].States = append(s.Machines[0].States, "C") }, "REVIEW_REQUIRED WRIT_COMPAT_STATE_ADDED"},
		"guard":           {func(s *Schema) { s.Machines[0].Transitions["A"] = nil }, "transitions removed A→B"},
		"machine removed": {func(s *Schema) { s.Machines = nil }, "BLOCKED WRIT_COMPAT_MACHINE_REMOVED"},
	} {
		s := sample()
		tc.edit(s)
		var got []string
		for _, f := range Diff(sample(), s) {
			got = append(got, string(f.Status)+" "+f.Code+": "+f.Msg)
		}
		if !strings.Contains(strings.Join(got, "\n"), tc.want) {
			t.Errorf("%s: want %q in\n%s", name, tc.want, strings.Join(got, "\n"))
		}
	}
}
