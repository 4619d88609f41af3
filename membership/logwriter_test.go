package membership

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
)

// TestLogWriter_LevelsWithoutTags: serf/memberlist lines keep their level
// and do not repeat it in the message; DEBUG lines are dropped.
func TestLogWriter_LevelsWithoutTags(t *testing.T) {
	var buf bytes.Buffer
	w := &logWriter{a: &Agent{log: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}}
	_, _ = w.Write([]byte("2026/12/01 21:00:00 [INFO] serf: EventMemberJoin: n1 127.0.0.1\n" +
		"2026/12/01 21:00:00 [WARN] serf: Shutdown without a Leave\n" +
		"2026/12/01 21:00:00 [ERR] memberlist: failed to send\n" +
		"2026/12/01 21:00:00 [DEBUG] memberlist: noise\n"))
	want := []struct{ level, msg string }{
		{"INFO", "membership: gossip: 2026/12/01 21:00:00 serf: EventMemberJoin: n1 127.0.0.1"},
		{"WARN", "membership: gossip: 2026/12/01 21:00:00 serf: Shutdown without a Leave"},
		{"ERROR", "membership: gossip: 2026/12/01 21:00:00 memberlist: failed to send"},
	}
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d: %s", len(lines), len(want), buf.String())
	}
	for i, l := range lines {
		var got map[string]any
		if err := json.Unmarshal(l, &got); err != nil {
			t.Fatal(err)
		}
		if got["level"] != want[i].level || got["msg"] != want[i].msg {
			t.Errorf("line %d: %v %q, want %s %q", i, got["level"], got["msg"], want[i].level, want[i].msg)
		}
	}
}
