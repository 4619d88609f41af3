package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"pgregory.net/rapid"
)

// fataler is what the helpers need of *testing.T and *rapid.T.
type fataler interface {
	Helper()
	Fatal(...any)
	Fatalf(string, ...any)
}

// canonical decodes JSON or YAML into plain values and re-encodes them as
// JSON with sorted keys, so the two can be compared.
func canonical(t fataler, b []byte, isYAML bool) string {
	t.Helper()
	var v any
	var err error
	if isYAML {
		err = yaml.Unmarshal(b, &v)
	} else {
		err = json.Unmarshal(b, &v)
	}
	if err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// splitYAMLDocs decodes every document of a YAML stream.
func splitYAMLDocs(t fataler, b []byte) []string {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var docs []string
	for {
		var v any
		if err := dec.Decode(&v); err == io.EOF {
			return docs
		} else if err != nil {
			t.Fatalf("yaml stream %q: %v", b, err)
		}
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(j))
	}
}

// jsonValue generates arbitrary JSON values, with strings chosen to look
// like other YAML types, YAML syntax, or to need escaping.
func jsonValue(depth int) *rapid.Generator[any] {
	tricky := rapid.SampledFrom([]string{"", "true", "no", "null", "~", "123", "0x1F", "1e3", "-", "- a", "a: b", "#x", "'q'", "\"dq\"",
		"line\nbreak", "tab\there", " lead", "trail ", "{x}", "[1]", "&a", "*a", "!t", "%d", "@", "`", "é✓", "---", "...", "=", "<<"})
	scalar := rapid.OneOf(
		rapid.Map(tricky, func(s string) any { return s }),
		rapid.Map(rapid.String(), func(s string) any { return s }),
		rapid.Map(rapid.Int64(), func(i int64) any { return float64(i % (1 << 53)) }),
		rapid.Map(rapid.Float64Range(-1e6, 1e6), func(f float64) any { return f }),
		rapid.Map(rapid.Bool(), func(b bool) any { return b }),
		rapid.Just[any](nil),
	)
	if depth == 0 {
		return scalar
	}
	key := rapid.OneOf(tricky, rapid.StringMatching(`[a-z_]{1,8}`))
	return rapid.OneOf(
		scalar,
		rapid.Map(rapid.SliceOfN(jsonValue(depth-1), 0, 4), func(l []any) any { return l }),
		rapid.Map(rapid.MapOfN(key, jsonValue(depth-1), 0, 4), func(m map[string]any) any { return m }),
	)
}

// TestYAMLOutputIsTheJSONRecord: for any JSON record, -o yaml prints YAML
// that decodes to the same value (strings that look like numbers, booleans
// or YAML syntax stay strings), and a stream of records is a YAML stream of
// the same documents in order.
func TestYAMLOutputIsTheJSONRecord(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		vals := rapid.SliceOfN(jsonValue(3), 1, 3).Draw(t, "records")
		var out bytes.Buffer
		a := &app{out: &out, output: outYAML}
		var want []string
		for _, v := range vals {
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, canonical(t, b, false))
			if err := a.emitJSON(b); err != nil {
				t.Fatalf("emit %s: %v", b, err)
			}
		}
		if got := splitYAMLDocs(t, out.Bytes()); !reflect.DeepEqual(got, want) {
			t.Fatalf("yaml stream\n%s\ndecodes to %v, want %v", out.String(), got, want)
		}
	})
}

// TestTableOutput: a record prints as FIELD VALUE rows with its lists of
// records as titled tables (one column per field, "-" for a missing or
// empty one); a list prints as one table; every cell stays on one line.
func TestTableOutput(t *testing.T) {
	rec := `{"node_id":"n1","ready":true,"term":"7","reason":"","tags":["a","b"],"leader":{"id":"n2"},
		"members":[{"id":"n1","status":"alive","match":"12"},{"id":"n2","status":"failed\twith\nnewline","extra":1}],"none":[]}`
	var out bytes.Buffer
	a := &app{out: &out, output: outTable}
	if err := a.emitJSON([]byte(rec)); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"FIELD    VALUE",
		"node_id  n1",
		"ready    true",
		"term     7",
		"reason   -",
		"tags     a,b",
		`leader   {"id":"n2"}`,
		"none     -",
		"",
		"members (2):",
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	for i, w := range want[:9] {
		if i >= len(lines) || strings.TrimRight(lines[i], " ") != w {
			t.Fatalf("line %d: %q, want %q\n%s", i, lines[i], w, out.String())
		}
	}
	if lines[9] != want[9] || len(lines) != 13 {
		t.Fatalf("members table:\n%s", out.String())
	}
	hdr, r1, r2 := strings.Fields(lines[10]), strings.Fields(lines[11]), strings.Fields(lines[12])
	if !reflect.DeepEqual(hdr, []string{"ID", "STATUS", "MATCH", "EXTRA"}) ||
		!reflect.DeepEqual(r1, []string{"n1", "alive", "12", "-"}) ||
		!reflect.DeepEqual(r2, []string{"n2", "failed", "with", "newline", "-", "1"}) {
		t.Fatalf("members table:\n%s", out.String())
	}

	out.Reset()
	if err := a.emitJSON([]byte(`[{"key":"k1","rev":"1"},{"key":"k2","rev":"2"}]`)); err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(out.String()); !reflect.DeepEqual(got, []string{"KEY", "REV", "k1", "1", "k2", "2"}) {
		t.Fatalf("list table:\n%s", out.String())
	}
	out.Reset()
	if err := a.emitJSON([]byte(`[]`)); err != nil || strings.TrimSpace(out.String()) != "(none)" {
		t.Fatalf("empty list table: %v %q", err, out.String())
	}
}

// TestTableCellsOneLine: whatever the record, every table row is one line
// and a record's FIELD VALUE block has one row per non-list field.
func TestTableCellsOneLine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := rapid.MapOfN(rapid.StringMatching(`[a-z_]{1,8}`), jsonValue(2), 1, 6).Draw(t, "record")
		b, _ := json.Marshal(m)
		var out bytes.Buffer
		a := &app{out: &out, output: outTable}
		if err := a.emitJSON(b); err != nil {
			t.Fatal(err)
		}
		n, err := parseJSONNode(b)
		if err != nil {
			t.Fatal(err)
		}
		fields, lists, rows := 0, 0, 0
		for i := 1; i < len(n.Content); i += 2 {
			if v := n.Content[i]; isRecordList(v) {
				lists++
				rows += 3 + len(v.Content) // blank, title, header, rows
			} else {
				fields++
			}
		}
		want := rows
		if fields > 0 {
			want += 1 + fields // header, rows
		} else if lists > 0 {
			want-- // no blank line before the first table
		}
		if got := strings.Count(out.String(), "\n"); got != want {
			t.Fatalf("%d lines for %d fields and %d lists, want %d:\n%s\nfrom %s", got, fields, lists, want, out.String(), b)
		}
	})
}

// TestOutputFormatsAgainstRealNode: against a real writd, -o yaml prints
// the same record as -o json for the structured commands, -o table prints
// their tables, and a watch stream in yaml is one document per event.
func TestOutputFormatsAgainstRealNode(t *testing.T) {
	addr := startNode(t, "127.0.19.1")
	ctl := func(args ...string) string {
		t.Helper()
		code, out, errs := run(t, "", append([]string{"--addr", addr}, args...)...)
		if code != 0 {
			t.Fatalf("writctl %v: exit %d\n%s%s", args, code, out, errs)
		}
		return out
	}
	ctl("submit", "queue.control", `{"queue":"q1","action":"create"}`)
	for i := 1; i <= 2; i++ {
		ctl("submit", "--id", fmt.Sprintf("req-o%d", i), "job.submit", fmt.Sprintf(`{"job_id":"o%d","queue":"q1","priority":1,"command":"run"}`, i))
	}
	for _, cmd := range [][]string{{"members"}, {"plugins"}, {"list", "job/"}, {"get", "job/o1"}, {"outcome", "req-o1"}, {"facts"}, {"conflicts"}, {"config", "show"}} {
		j := ctl(append([]string{"-o", "json"}, cmd...)...)
		y := ctl(append([]string{"-o", "yaml"}, cmd...)...)
		if cj, cy := canonical(t, []byte(j), false), canonical(t, []byte(y), true); cj != cy {
			t.Errorf("%v: yaml\n%s\nis not the json record\n%s", cmd, y, j)
		}
	}
	// status changes between calls (the log advances): compare its shape.
	var sj, sy map[string]any
	if err := json.Unmarshal([]byte(ctl("-o", "json", "status")), &sj); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(ctl("-o", "yaml", "status")), &sy); err != nil {
		t.Fatal(err)
	}
	if len(sj) != len(sy) || sy["node_id"] != "node1" || sy["is_leader"] != true {
		t.Errorf("status -o yaml %v vs -o json %v", sy, sj)
	}

	members := ctl("-o", "table", "members")
	if !strings.Contains(members, "members (1):") || !strings.Contains(members, "node1") || !strings.Contains(members, "RAFT_ADDR") {
		t.Errorf("members -o table:\n%s", members)
	}
	list := strings.Split(strings.TrimSpace(ctl("-o", "table", "list", "job/")), "\n")
	if len(list) != 3 || !strings.HasPrefix(list[0], "KEY") || !strings.HasPrefix(list[1], "job/o1") || !strings.HasPrefix(list[2], "job/o2") {
		t.Errorf("list -o table:\n%s", strings.Join(list, "\n"))
	}
	status := ctl("-o", "table", "status")
	if !strings.HasPrefix(status, "FIELD") || !strings.Contains(status, "node_id") || !strings.Contains(status, "is_leader") {
		t.Errorf("status -o table:\n%s", status)
	}
	docs := splitYAMLDocs(t, []byte(ctl("-o", "yaml", "watch", "--from", "1", "--type", "job.submit", "--count", "2", "--for", "10s")))
	if len(docs) != 2 || !strings.Contains(docs[0], `"o1"`) || !strings.Contains(docs[1], `"o2"`) {
		t.Errorf("watch -o yaml: %d documents %v", len(docs), docs)
	}
}
