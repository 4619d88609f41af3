package main

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestBenchTemplateRender(t *testing.T) {
	tm, err := parseBenchTemplate([]byte(`{"report_id":"{{run}}-{{seq}}-{{rand}}","holder_id":"h-{{client}}","seq":{{seq}},"n":{{ client }}}`), `r"un\`)
	if err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	var v struct {
		ReportID string `json:"report_id"`
		HolderID string `json:"holder_id"`
		Seq      int    `json:"seq"`
		N        int    `json:"n"`
	}
	p := tm.render(42, 7, rnd)
	if err := json.Unmarshal(p, &v); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	if !strings.HasPrefix(v.ReportID, `r"un\-42-`) || len(v.ReportID) != len(`r"un\-42-`)+16 || v.HolderID != "h-7" || v.Seq != 42 || v.N != 7 {
		t.Fatalf("rendered %s -> %+v", p, v)
	}
	if q := tm.render(42, 7, rnd); string(q) == string(p) {
		t.Fatalf("{{rand}} repeated: %s", q)
	}
}

func TestBenchTemplateRefused(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`{"id":{{rand}}}`, "not valid JSON after substitution"},
		{`{"id":"{{seq}}"`, "not valid JSON after substitution"},
		{`not json`, "not valid JSON after substitution"},
		{`{"id":"{{sequence}}"}`, "unknown placeholder {{sequence}}"},
		{`{"id":"{{seq"}`, "never closed"},
		{``, "not valid JSON after substitution"},
	} {
		_, err := parseBenchTemplate([]byte(c.src), "run")
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: got %v, want one line with %q", c.src, err, c.want)
		}
	}
}

// Every accepted template renders valid JSON with the placeholder values
// in place, for any run name, sequence number and client.
func TestBenchTemplateProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		run := rapid.String().Draw(t, "run")
		seq := rapid.IntRange(0, 1<<40).Draw(t, "seq")
		client := rapid.IntRange(0, 1<<20).Draw(t, "client")
		pad, _ := json.Marshal(strings.ReplaceAll(rapid.StringN(0, 2048, -1).Draw(t, "pad"), "{", "("))
		tm, err := parseBenchTemplate([]byte(`{"id":"{{run}}/{{seq}}/{{client}}/{{rand}}","seq":{{seq}},"pad":`+string(pad)+`}`), run)
		if err != nil {
			t.Fatal(err)
		}
		p := tm.render(seq, client, rand.New(rand.NewPCG(uint64(seq), 0)))
		var v struct {
			ID  string `json:"id"`
			Seq int    `json:"seq"`
		}
		if err := json.Unmarshal(p, &v); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		want := strings.ToValidUTF8(run, "\uFFFD") + "/" + strconv.Itoa(seq) + "/" + strconv.Itoa(client) + "/"
		if !strings.HasPrefix(v.ID, want) || v.Seq != seq {
			t.Fatalf("id %q seq %d, want prefix %q seq %d", v.ID, v.Seq, want, seq)
		}
	})
}

// FuzzBenchTemplate: a template that parses renders valid JSON for any values.
func FuzzBenchTemplate(f *testing.F) {
	f.Add(`{"a":"{{seq}}","b":{{seq}},"c":"{{rand}}"}`, 3, 1)
	f.Add(`[{{client}},"{{run}}"]`, 0, 0)
	f.Add(`{"x":{{rand}}}`, 1, 1)
	f.Fuzz(func(t *testing.T, src string, seq, client int) {
		tm, err := parseBenchTemplate([]byte(src), "run")
		if err != nil {
			return
		}
		seq, client = max(seq, 0), max(client, 0)
		if p := tm.render(seq, client, rand.New(rand.NewPCG(uint64(seq), uint64(client)))); !json.Valid(p) {
			t.Fatalf("accepted %q, rendered invalid %q", src, p)
		}
	})
}
