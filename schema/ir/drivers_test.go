package ir

import (
	"reflect"
	"testing"
)

func TestDrivers(t *testing.T) {
	m := &Machine{Name: "door", States: []string{"OPEN", "SHUT", "LOCKED"}}
	s := &Schema{
		Machines: []*Machine{m},
		Entries: []*Entry{
			{Name: "door.install", Machine: "door", ToState: "SHUT"},
			{Name: "door.act", Machine: "door", To: "action", ToMap: map[string]string{"open": "OPEN", "close": "SHUT", "lock": "LOCKED"}},
			{Name: "door.report", Machine: "door", To: "state", Fields: []*Field{{Name: "state", Kind: KindString, Enum: []string{"OPEN", "SHUT"}}}},
			{Name: "door.note", Machine: "door"},
			{Name: "other", Machine: "window", ToState: "OPEN"},
		},
	}
	want := map[string][]string{
		"SHUT":   {"door.install", "door.act:close", "door.report"},
		"OPEN":   {"door.act:open", "door.report"},
		"LOCKED": {"door.act:lock"},
	}
	if got := s.Drivers(m); !reflect.DeepEqual(got, want) {
		t.Fatalf("Drivers:\n got %v\nwant %v", got, want)
	}
}
