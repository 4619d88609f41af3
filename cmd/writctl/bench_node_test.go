package main

import (
	"encoding/csv"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestBenchAnyTypeAgainstRealNode runs bench with payload templates for a
// request, a fact and a receipt type of the leases schema against a real
// stock writd --schema with the real leases plugin process.
func TestBenchAnyTypeAgainstRealNode(t *testing.T) {
	addr := startNodeWith(t, "127.0.22.1", "github.com/writ-dev/writ/examples/leases/cmd/writ-leases", "--schema", "../../examples/leases/schema")
	ctl := func(args ...string) (int, string, string) {
		return run(t, "", append([]string{"--addr", addr}, args...)...)
	}
	must := func(want int, contains string, args ...string) string {
		t.Helper()
		code, out, errs := ctl(args...)
		if code != want || !strings.Contains(out+errs, contains) {
			t.Fatalf("writctl %v: exit %d (want %d)\nstdout: %s\nstderr: %s\nwant output containing %q", args, code, want, out, errs, contains)
		}
		return out
	}
	dir := t.TempDir()
	tmpl := filepath.Join(dir, "register.json")
	if err := os.WriteFile(tmpl, []byte(`{"holder_id": "{{run}}-h{{seq}}", "session_ttl_ms": 60000, "labels": ["c{{client}}"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	csvPath, svgPath := filepath.Join(dir, "b.csv"), filepath.Join(dir, "b.svg")

	// A request type: every operation COMMITTED, one holder per seq.
	out := must(0, `"ops_per_sec"`, "bench", "--type", "holder.register", "--payload", "@"+tmpl, "--run", "lb",
		"--clients", "4", "--ops", "60", "--csv", csvPath, "--plot", svgPath, "-o", "json")
	var br BenchResult
	if err := json.Unmarshal([]byte(out), &br); err != nil || br.Kind != "request" || br.Outcomes["COMMITTED"] != 60 || len(br.Outcomes) != 1 || br.P99 < br.P50 {
		t.Fatalf("bench holder.register: %v %+v", err, br)
	}
	for _, h := range []string{"lb-h0", "lb-h1", "lb-h59"} {
		must(0, `"ACTIVE"`, "get", "_m/holder/"+h)
	}
	f, err := os.Open(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(f).ReadAll()
	_ = f.Close()
	if err != nil || len(recs) < 2 || strings.Join(recs[0], ",") != "second,ops,failed,ops_per_sec,p50_ms,p90_ms,p99_ms,max_ms" {
		t.Fatalf("csv: %v %q", err, recs)
	}
	sum := 0
	for _, r := range recs[1:] {
		n, err := strconv.Atoi(r[1])
		if err != nil || r[2] != "0" {
			t.Fatalf("csv row %q: %v", r, err)
		}
		sum += n
	}
	if sum != 60 {
		t.Fatalf("csv rows add up to %d ops, want 60: %q", sum, recs)
	}
	if svg, err := os.ReadFile(svgPath); err != nil || !strings.HasPrefix(string(svg), "<svg ") || strings.Count(string(svg), "<polyline") != 2 {
		t.Fatalf("plot: %v\n%s", err, svg)
	}

	// A fact type with the largest status the schema allows: RECEIVED,
	// then committed from the outbox (unique report IDs from the template).
	status := strings.Repeat("é", 256)
	out = must(0, "RECEIVED", "bench", "--type", "holder.heartbeat", "--run", "lb", "--clients", "3", "--ops", "60",
		"--payload", `{"report_id":"{{run}}-hb{{seq}}-{{rand}}","holder_id":"{{run}}-h{{seq}}","seq":{{seq}},"status":"`+status+`"}`)
	if !strings.Contains(out, "holder.heartbeat (fact): 60 ops, 3 clients") || strings.Contains(out, "\r") {
		t.Fatalf("bench holder.heartbeat text output (no terminal: no progress line): %q", out)
	}
	waitFor(t, func() bool { c, o, _ := ctl("facts"); return c == 0 && strings.Contains(o, ": 0 facts") })
	must(0, "0 open conflict", "conflicts")

	// A receipt type: every batch RECEIVED, its items on watch.
	must(0, "lease.grant_batch (receipt): 20 ops", "bench", "--type", "lease.grant_batch", "--run", "lb", "--clients", "2", "--ops", "20",
		"--payload", `{"batch_id":"{{run}}-g{{seq}}","arbiter":"a{{client}}","items":[{"lease_id":"{{run}}-l{{seq}}","holder_id":"{{run}}-h{{seq}}","ttl_ms":60000}]}`)
	waitFor(t, func() bool { c, o, _ := ctl("get", "_m/lease/lb-l19"); return c == 0 && strings.Contains(o, `"HELD"`) })

	// Bad input: one line naming what to fix, nothing sent.
	for _, c := range []struct {
		code      int
		want      string
		args      []string
		wantLines int
	}{
		{exitUsage, "not valid JSON after substitution", []string{"--payload", `{"holder_id":{{rand}},"session_ttl_ms":60000}`}, 1},
		{exitUsage, "unknown placeholder {{id}}", []string{"--payload", `{"holder_id":"{{id}}","session_ttl_ms":60000}`}, 1},
		{exitError, "session_ttl_ms", []string{"--payload", `{"holder_id":"x{{seq}}","session_ttl_ms":1}`}, 1},
		{exitUsage, "--payload @template.json", []string{}, 1},
		{exitUsage, "bytes, the limit is 1048576: send a smaller template", []string{"--payload", `{"holder_id":"{{seq}}","x":"` + strings.Repeat("y", 1<<20) + `"}`}, 1},
	} {
		args := append([]string{"bench", "--type", "holder.register", "--ops", "5"}, c.args...)
		code, out, errs := ctl(args...)
		if code != c.code || !strings.Contains(errs, c.want) || strings.Count(errs, "\n") != c.wantLines || out != "" {
			t.Errorf("writctl %v: exit %d (want %d)\nstdout: %q\nstderr: %q\nwant one line with %q", args, code, c.code, out, errs, c.want)
		}
	}
	code, out, errs := ctl("bench", "--type", "leases.config", "--payload", `{"version":"1.{{seq}}","settings":{"default_ttl_ms":1000,"max_ttl_ms":2000,"expiry_sweep":"1s","reclaim_expired":true}}`)
	if code != exitUsage || !strings.Contains(errs, "writctl config upgrade --type leases.config") || strings.Count(errs, "\n") != 1 || out != "" {
		t.Errorf("bench leases.config: exit %d stdout %q stderr %q", code, out, errs)
	}
	must(0, "no configuration of this type has activated", "config", "show", "--type", "leases.config")
	must(1, "not found", "get", "_m/holder/x0")

	// On a terminal, the live progress line: ops done, ops/s and p99.
	old := benchTTY
	benchTTY = func(io.Writer) bool { return true }
	defer func() { benchTTY = old }()
	out = must(0, "COMMITTED", "bench", "--type", "holder.register", "--payload", "@"+tmpl, "--run", "tty", "--ops", "1500", "--clients", "2")
	i := strings.Index(out, "\r")
	if i < 0 || !strings.Contains(out[i:], "/1500 ops  ") || !strings.Contains(out, " ops/s  p99 ") || !strings.Contains(out, "\r\x1b[Kholder.register (request): 1500 ops") {
		t.Fatalf("no progress line on a terminal:\n%q", out)
	}
}

// TestBenchReadsAndDurationAgainstRealNode times linearizable and
// serializable Gets of a real key, a missing key (counted, exit 1), and a
// --duration-bounded write run whose longest gap is within its length.
func TestBenchReadsAndDurationAgainstRealNode(t *testing.T) {
	addr := startNode(t, "127.0.63.1")
	ctl := func(args ...string) (int, string, string) {
		return run(t, "", append([]string{"--addr", addr}, args...)...)
	}
	bench := func(want int, args ...string) BenchResult {
		t.Helper()
		code, out, errs := ctl(append([]string{"bench", "-o", "json"}, args...)...)
		var br BenchResult
		if err := json.Unmarshal([]byte(out), &br); code != want || err != nil {
			t.Fatalf("writctl bench %v: exit %d (want %d), %v\nstdout: %s\nstderr: %s", args, code, want, err, out, errs)
		}
		return br
	}
	w := bench(0, "--run", "rd", "--clients", "2", "--ops", "20", "--size", "256")
	if w.Outcomes["COMMITTED"] != 20 || w.MaxGap <= 0 || w.MaxGap > w.Seconds*1000 {
		t.Fatalf("bench writes: %+v", w)
	}
	for _, ser := range []string{"--serializable=false", "--serializable=true"} {
		r := bench(0, "--get", "_m/job/rd-0", ser, "--clients", "3", "--ops", "50")
		if r.Kind != "read" || r.Outcomes["FOUND"] != 50 || len(r.Outcomes) != 1 || r.P99 < r.P50 {
			t.Fatalf("bench --get %s: %+v", ser, r)
		}
	}
	if r := bench(1, "--get", "_m/job/no-such-job", "--ops", "5"); r.Outcomes["NOT_FOUND"] != 5 {
		t.Fatalf("bench --get of a missing key: %+v", r)
	}
	if code, _, errs := ctl("bench", "--get", "k", "--payload", "{}"); code != exitUsage || !strings.Contains(errs, "--get") {
		t.Fatalf("bench --get --payload: exit %d, %s", code, errs)
	}
	// --duration ends the run before --ops: fewer ops, all of them counted.
	d := bench(0, "--run", "du", "--clients", "2", "--ops", "1000000", "--duration", "1500ms")
	if d.Ops >= 1000000 || d.Ops < 1 || d.Outcomes["COMMITTED"] != d.Ops || d.Seconds < 1.5 || d.Seconds > 15 || d.MaxGap > d.Seconds*1000 {
		t.Fatalf("bench --duration 1.5s: %+v", d)
	}
}
