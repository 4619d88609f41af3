package wire

import (
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"testing"

	"github.com/writ-dev/writ/schema/ir"
	"github.com/writ-dev/writ/schema/jsonscan"
)

func TestDocument(t *testing.T) {
	for in, want := range map[string]string{
		`{}`:         "",
		` {"a":1} `:  "",
		`{"a":}`:     "is not valid JSON (fix: send a JSON object)",
		`[]`:         "must be a JSON object",
		`"x"`:        "must be a JSON object",
		``:           "is not valid JSON (fix: send a JSON object)",
		`{"a":1} {}`: "is not valid JSON (fix: send a JSON object)",
	} {
		err := Document([]byte(in))
		got := ""
		if err != nil {
			got = err.Msg
			if err.Rule != "json" || err.Field != "" {
				t.Errorf("%q: %#v", in, err)
			}
		}
		if got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

func TestMembers(t *testing.T) {
	type kv struct{ k, v string }
	for in, want := range map[string][]kv{
		`{}`:                               nil,
		` { } `:                            nil,
		`{"a":1}`:                          {{"a", "1"}},
		`{ "a" : [1, 2] , "b":{"c":"d"} }`: {{"a", "[1, 2]"}, {"b", `{"c":"d"}`}},
		`{"a\u0062":true,"":null}`:         {{"ab", "true"}, {"", "null"}},
	} {
		m := MembersOf([]byte(in))
		var got []kv
		for m.Next() {
			got = append(got, kv{string(m.Key()), string(m.Value())})
		}
		if m.Err() != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v (err %v), want %v", in, got, m.Err(), want)
		}
	}
}

// TestMembersMalformedKey: a key that does not unescape ends the iteration
// with an error, after the members before it. Document refuses such a
// document first, so the iterator is built by hand here.
func TestMembersMalformedKey(t *testing.T) {
	m := Members{data: []byte(`{"a":1,"\x":2}`), i: 1}
	if !m.Next() || string(m.Key()) != "a" {
		t.Fatal("first member not read")
	}
	if m.Next() {
		t.Fatalf("read a malformed key as %q", m.Key())
	}
	if fe := m.Err(); fe == nil || fe.Msg != "has a malformed key" || fe.Rule != "json" {
		t.Fatalf("Err: %#v", fe)
	}
}

func TestReaders(t *testing.T) {
	type res struct {
		v    any
		rule string
	}
	read := map[string]func([]byte) (any, *ir.FieldError){
		"string": func(b []byte) (any, *ir.FieldError) { return String(b) },
		"bool":   func(b []byte) (any, *ir.FieldError) { return Bool(b) },
		"int":    func(b []byte) (any, *ir.FieldError) { return Int(b) },
		"uint":   func(b []byte) (any, *ir.FieldError) { return Uint(b) },
		"float":  func(b []byte) (any, *ir.FieldError) { return Float(b, true) },
		"number": func(b []byte) (any, *ir.FieldError) { return Float(b, false) },
	}
	for _, c := range []struct {
		kind, in string
		want     res
	}{
		{"string", `"plain"`, res{"plain", ""}},
		{"string", `"h\u00e9\n"`, res{"hé\n", ""}},
		{"string", `"héllo"`, res{"héllo", ""}},
		{"string", "\"\xff\"", res{"", "string"}},
		{"string", `1`, res{"", "string"}},
		{"bool", `true`, res{true, ""}},
		{"bool", `null`, res{false, "bool"}},
		{"int", `-9223372036854775808`, res{int64(math.MinInt64), ""}},
		{"int", `9223372036854775807`, res{int64(math.MaxInt64), ""}},
		{"int", `9223372036854775808`, res{int64(0), "int64"}},
		{"int", `-9223372036854775809`, res{int64(0), "int64"}},
		{"int", `99999999999999999999`, res{int64(0), "int64"}},
		{"int", `1.0`, res{int64(0), "integer"}},
		{"uint", `18446744073709551615`, res{uint64(math.MaxUint64), ""}},
		{"uint", `18446744073709551616`, res{uint64(0), "uint64"}},
		{"uint", `-0`, res{uint64(0), ""}},
		{"uint", `-1`, res{uint64(0), ">=0"}},
		{"uint", `"1"`, res{uint64(0), "integer"}},
		{"float", `1.5`, res{1.5, ""}},
		{"float", `1`, res{0.0, "float"}},
		{"float", `1e400`, res{0.0, "float64"}},
		{"float", `true`, res{0.0, "number"}},
		{"number", `2`, res{2.0, ""}},
		{"number", `-2e-3`, res{-0.002, ""}},
	} {
		v, fe := read[c.kind]([]byte(c.in))
		got := res{v, ""}
		if fe != nil {
			got.rule = fe.Rule
			if fe.Field != "" {
				t.Errorf("%s %s: error names field %q", c.kind, c.in, fe.Field)
			}
		}
		if got != c.want {
			t.Errorf("%s %s: %v, want %v", c.kind, c.in, got, c.want)
		}
	}
}

func TestObjectAndList(t *testing.T) {
	if fe := Object([]byte(`[1]`)); fe == nil || fe.Msg != "must be object, not a list (fix: send object)" {
		t.Fatalf("Object: %#v", fe)
	}
	if Object([]byte(`{}`)) != nil {
		t.Fatal("Object refused an object")
	}
	if l, fe := List([]byte(`[]`)); fe != nil || l == nil || len(l) != 0 {
		t.Fatalf("empty list: %v %v", l, fe)
	}
	l, fe := List([]byte(`[ 1, "a" ,{"b":[2]}]`))
	if fe != nil || len(l) != 3 || string(l[0]) != "1" || string(l[1]) != `"a"` || string(l[2]) != `{"b":[2]}` {
		t.Fatalf("List: %q %v", l, fe)
	}
	if _, fe := List([]byte(`{}`)); fe == nil || fe.Rule != "list" {
		t.Fatalf("List of an object: %#v", fe)
	}
}

func TestPaths(t *testing.T) {
	fe := Under(Member("spec"), Under(Member("env"), Under(Index(2), Under(Member("name"), WrongType("string", []byte("1"))))))
	if fe.Field != ".spec.env[2].name" {
		t.Fatalf("Under: %q", fe.Field)
	}
	Root("rollout.start", fe)
	if fe.Type != "rollout.start" || fe.Field != "spec.env[2].name" {
		t.Fatalf("Root: %#v", fe)
	}
	if fe := Root("t", UnknownField("", "a, b")); fe.Field != "" {
		t.Fatalf("unknown empty key at the root: %q", fe.Field)
	}
	if fe := Root("t", Under(Member("spec"), UnknownField("", "a"))); fe.Field != "spec." {
		t.Fatalf("unknown empty key in spec: %q", fe.Field)
	}
	if fe := Root("t", MissingField("a")); fe.Field != "a" || fe.Rule != "required" {
		t.Fatalf("MissingField: %#v", fe)
	}
	if fe := Root("t", DuplicateField("a")); fe.Field != "a" || fe.Rule != "unique keys" {
		t.Fatalf("DuplicateField: %#v", fe)
	}
	item := &ir.FieldError{Type: "job.assign", Field: "job_id", Rule: "r", Msg: "m"}
	if err := Nest("job.dispatch", "items"+Index(1), item); !reflect.DeepEqual(err, &ir.FieldError{Type: "job.dispatch", Field: "items[1].job_id", Rule: "r", Msg: "m"}) {
		t.Fatalf("Nest: %#v", err)
	}
	if got := Quote(string(make([]byte, 70))); len(got) < 64 || got[len(got)-len("…"):] != "…" {
		t.Fatalf("Quote: %s", got)
	}
}

// FuzzReaders: inside a valid document, every reader agrees with
// encoding/json about what a value is, and never panics.
func FuzzReaders(f *testing.F) {
	for _, s := range []string{`"a\u00e9"`, `-0`, `1e5`, `18446744073709551615`, `-9223372036854775808`, `[1,"x",{}]`, `{"a":{"b":[]}}`, `true`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, val []byte) {
		if !jsonscan.Valid(val) {
			return
		}
		val = val[jsonscan.SkipSpace(val, 0):jsonscan.SkipValue(val, jsonscan.SkipSpace(val, 0))]
		if s, fe := String(val); fe == nil {
			var want string
			if err := json.Unmarshal(val, &want); err != nil || s != want {
				t.Fatalf("String(%s) = %q, json %q %v", val, s, want, err)
			}
		}
		if i, fe := Int(val); fe == nil {
			var want int64
			if err := json.Unmarshal(val, &want); err != nil || i != want {
				t.Fatalf("Int(%s) = %d, json %d %v", val, i, want, err)
			}
		} else if _, err := strconv.ParseInt(string(val), 10, 64); err == nil {
			t.Fatalf("Int(%s) refused an int64: %v", val, fe)
		}
		if u, fe := Uint(val); fe == nil && string(val) != "-0" {
			var want uint64
			if err := json.Unmarshal(val, &want); err != nil || u != want {
				t.Fatalf("Uint(%s) = %d, json %d %v", val, u, want, err)
			}
		}
		if x, fe := Float(val, false); fe == nil {
			var want float64
			if err := json.Unmarshal(val, &want); err != nil || x != want {
				t.Fatalf("Float(%s) = %g, json %g %v", val, x, want, err)
			}
		}
		if l, fe := List(val); fe == nil {
			var want []json.RawMessage
			if err := json.Unmarshal(val, &want); err != nil || len(l) != len(want) {
				t.Fatalf("List(%s) has %d elements, json %d %v", val, len(l), len(want), err)
			}
		}
		if Object(val) == nil {
			m := MembersOf(val)
			n := 0
			for m.Next() {
				n++
				if !jsonscan.Valid(m.Value()) {
					t.Fatalf("member value %q of %s is not a JSON value", m.Value(), val)
				}
			}
			var want map[string]json.RawMessage
			if err := json.Unmarshal(val, &want); m.Err() == nil && (err != nil || n < len(want)) {
				t.Fatalf("Members(%s) saw %d members, json %d %v", val, n, len(want), err)
			}
		}
	})
}
