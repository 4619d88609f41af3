package node

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/writ-dev/writ/metrics"
	"github.com/writ-dev/writ/pipeline"
)

// jsonKeys returns a JSON object's top-level keys in order, with their
// raw values (duplicates kept: encoding/json would silently merge them).
func jsonKeys(t interface{ Fatalf(string, ...any) }, line []byte) ([]string, map[string]string) {
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object: %q", line)
	}
	var keys []string
	last := map[string]string{}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		keys = append(keys, k.(string))
		last[k.(string)] = string(v)
	}
	return keys, last
}

func dupKeys(keys []string) []string {
	seen := map[string]int{}
	var d []string
	for _, k := range keys {
		if seen[k]++; seen[k] == 2 {
			d = append(d, k)
		}
	}
	return d
}

// TestUniqueKeys_ComponentsRepeatingNodeAndComponent is the case the logs
// showed: the node's logger carries node and component, raftstore adds
// both again, membership adds node again.
func TestUniqueKeys_ComponentsRepeatingNodeAndComponent(t *testing.T) {
	for _, wrap := range []bool{false, true} {
		var buf bytes.Buffer
		var h slog.Handler = slog.NewJSONHandler(&buf, nil)
		if wrap {
			h = uniqueKeys(h)
		}
		base := slog.New(h).With("node", "n1")
		base.With("component", "raft").With("component", "raftstore", "node", "n1").Info("started", "applied", 3)
		base.With("component", "membership").With("node", "n1").Info("joined")
		for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
			keys, last := jsonKeys(t, line)
			d := dupKeys(keys)
			if wrap && len(d) > 0 {
				t.Errorf("uniqueKeys: %s repeats %v", line, d)
			}
			if !wrap && len(d) == 0 {
				t.Errorf("plain handler did not repeat keys on %s: the test no longer shows the problem", line)
			}
			if wrap && strings.Contains(string(line), `"started"`) && last["component"] != `"raftstore"` {
				t.Errorf("the innermost component should win: %s", line)
			}
		}
	}
}

// TestUniqueKeys_Property: whatever sequence of With calls and record
// attributes, every key appears once and carries its last value.
func TestUniqueKeys_Property(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var buf bytes.Buffer
		l := slog.New(uniqueKeys(slog.NewJSONHandler(&buf, nil)))
		want := map[string]string{}
		keyGen := rapid.SampledFrom([]string{"node", "component", "id", "request_id", "type", "err"})
		for range rapid.IntRange(0, 5).Draw(rt, "withs") {
			var args []any
			for range rapid.IntRange(0, 3).Draw(rt, "attrs") {
				k, v := keyGen.Draw(rt, "k"), rapid.StringMatching(`[a-z0-9]{0,4}`).Draw(rt, "v")
				args = append(args, k, v)
				want[k] = v
			}
			l = l.With(args...)
		}
		var args []any
		for range rapid.IntRange(0, 3).Draw(rt, "recattrs") {
			k, v := keyGen.Draw(rt, "rk"), rapid.StringMatching(`[a-z0-9]{0,4}`).Draw(rt, "rv")
			args = append(args, k, v)
			want[k] = v
		}
		l.Info("m", args...)
		keys, last := jsonKeys(rt, bytes.TrimSpace(buf.Bytes()))
		if d := dupKeys(keys); len(d) > 0 {
			rt.Fatalf("repeated keys %v in %s", d, buf.String())
		}
		for k, v := range want {
			if last[k] != fmt.Sprintf("%q", v) {
				rt.Fatalf("key %s = %s, want %q (line %s)", k, last[k], v, buf.String())
			}
		}
	})
}

// TestSlogWriter_HclogLevels: go-plugin and hclog lines keep their level
// and lose their own timestamp.
func TestSlogWriter_HclogLevels(t *testing.T) {
	cases := []struct {
		line  string
		level string
		msg   string
	}{
		{"2026-12-01T21:00:00.000Z [ERROR] writ-plugin-host: plugin process exited: path=/x pid=3", "ERROR", "writ-plugin-host: plugin process exited: path=/x pid=3"},
		{"2026-12-01T21:00:00.000Z [WARN]  writ-plugin-host: slow", "WARN", "writ-plugin-host: slow"},
		{"2026-12-01T21:00:00.000Z [INFO]  plugin started", "INFO", "plugin started"},
		{"2026-12-01T21:00:00.000Z [DEBUG] plugin: waiting", "DEBUG", "plugin: waiting"},
		{`{"@level":"error","@message":"handler failed","@module":"jobs","@timestamp":"2026-12-01T21:00:00.000Z","job":"j1"}`, "ERROR", "handler failed"},
		{`{"@level":"warn","@message":"careful","@timestamp":"2026-12-01T21:00:00.000Z"}`, "WARN", "careful"},
		{"plain stderr text", "INFO", "plain stderr text"},
	}
	for _, c := range cases {
		var buf bytes.Buffer
		w := &slogWriter{l: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
		if _, err := io.WriteString(w, c.line+"\n"); err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
			t.Fatalf("%q: %v: %s", c.line, err, buf.String())
		}
		if got["level"] != c.level || got["msg"] != c.msg {
			t.Errorf("%q logged as level=%v msg=%q, want %s %q", c.line, got["level"], got["msg"], c.level, c.msg)
		}
		if strings.Contains(fmt.Sprint(got["msg"]), "2026-12-01T21") {
			t.Errorf("%q: a second timestamp is left in msg %q", c.line, got["msg"])
		}
	}
}

// TestRequestLog_SlowRequestLine: a request over SlowRequest is logged
// once, with its request ID and stage timings; a fast one is not.
func TestRequestLog_SlowRequestLine(t *testing.T) {
	var buf bytes.Buffer
	r := &requestLog{Metrics: newTestMetrics(), log: slog.New(slog.NewJSONHandler(&buf, nil))}
	r.RequestDone(pipeline.RequestTiming{ID: "fast", Type: "job.submit", Status: "COMMITTED", Total: SlowRequest / 2})
	if buf.Len() != 0 {
		t.Fatalf("fast request logged: %s", buf.String())
	}
	r.RequestDone(pipeline.RequestTiming{ID: "r-1", Type: "job.submit", Status: "UNCERTAIN", Total: SlowRequest + time.Millisecond,
		Evaluate: 900 * time.Millisecond, Append: time.Millisecond, CommitWait: 100 * time.Millisecond})
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, buf.String())
	}
	for k, v := range map[string]any{"level": "WARN", "msg": "pipeline: slow request", "request_id": "r-1", "type": "job.submit", "status": "UNCERTAIN",
		"queue_evaluate": float64(900 * time.Millisecond), "append": float64(time.Millisecond), "commit_wait": float64(100 * time.Millisecond)} {
		if got[k] != v {
			t.Errorf("slow-request line %s = %v, want %v (%s)", k, got[k], v, buf.String())
		}
	}
}

func newTestMetrics() *metrics.Metrics { return metrics.New() }
