package jsonscan

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

var corpus = []string{
	``, ` `, `{}`, `[]`, ` { } `, `{"a":1}`, `{"a":1,}`, `{,}`, `{"a"}`, `{"a":}`, `{"a" : [1, 2 ,3 ] }`,
	`{"a":1 "b":2}`, `{1:2}`, `[1,]`, `[,1]`, `[1 2]`, `"x"`, `"x`, `"\u00e9"`, `"\u00g9"`, `"\u00e"`, `"\x"`,
	`"\/\b\f\n\r\t\"\\"`, "\"a\tb\"", "\"a\x00\"", "\"\xff\xfe\"", `0`, `-0`, `01`, `-`, `-a`, `+1`, `1.`, `1.5`,
	`.5`, `1e`, `1e+`, `1e+5`, `1E-05`, `1.5e3`, `0.0e0`, `00`, `1 2`, `true`, `tru`, `truex`, `false`, `null`,
	`nul`, `[true,false,null]`, `{"a":{"b":[{"c":null}]}}`, "\t\r\n[1]\n", `[1]]`, `[[1]`, `{"a":1}}`, `}`, `]`,
	`"a" "b"`, `{"a":1}{}`, `[-]`, `[--1]`, `[1e5e5]`, `{"\u0041":1}`, `{"a\"b":1}`, `[""]`, `["\"]`,
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	strings.Repeat("[", 9999) + "{}" + strings.Repeat("]", 9999),
	strings.Repeat("[", 10000) + "{}" + strings.Repeat("]", 10000),
	strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000),
	strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001),
	`{"job_id":"j1","state":"PENDING"}`, ` [1, -2.5e+3, true, false, null, "a\u00e9\n"] `, `-0.0E1`, "\"\x01\"",
	`[[[`, `"\ud800"`,
}

func TestValidJSONAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range corpus {
		if got, want := Valid([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("%.60q: Valid %v, json.Valid %v", s, got, want)
		}
	}
	// Mutations of valid documents: every byte replaced, deleted, or
	// followed by a JSON-significant byte.
	rng := rand.New(rand.NewPCG(1, 2))
	sig := []byte(`{}[]":,\ -+.eE0129tfnulrsa` + "\x00\x1f\x7f\xff\t\n")
	for _, s := range corpus[:60] {
		if !json.Valid([]byte(s)) {
			continue
		}
		for i := 0; i <= len(s); i++ {
			for k := 0; k < 6; k++ {
				c := sig[rng.IntN(len(sig))]
				for _, m := range []string{s[:i] + string(c) + s[i:], s[:i] + string(c) + s[min(i+1, len(s)):], s[:i] + s[min(i+1, len(s)):]} {
					if got, want := Valid([]byte(m)), json.Valid([]byte(m)); got != want {
						t.Fatalf("%q: Valid %v, json.Valid %v", m, got, want)
					}
				}
			}
		}
	}
}

func FuzzValidJSON(f *testing.F) {
	for _, s := range corpus {
		if len(s) < 200 {
			f.Add([]byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("%q: Valid %v, json.Valid %v", b, got, want)
		}
	})
}

func BenchmarkValidJSON(b *testing.B) {
	doc := []byte(`{"job_id":"j-0001","queue":"default","priority":5,"command":"make test","cpu_millis":500}`)
	b.Run("jsonscan", func(b *testing.B) {
		for b.Loop() {
			Valid(doc)
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		for b.Loop() {
			json.Valid(doc)
		}
	})
}
