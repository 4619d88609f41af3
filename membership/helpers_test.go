package membership

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// logSink collects an agent's log output so tests can check what operators
// would see.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *logSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func (s *logSink) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(s, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// testConfig is a node with short grace and reconcile periods on the LAN
// timing profile, which tolerates a heavily loaded test machine; tests about
// failure detection switch to ProfileLocal. ip must be one of
// 127.0.2.1–127.0.2.40.
func testConfig(id, ip string, seeds ...string) Config {
	return Config{
		NodeID:            id,
		BindAddr:          ip,
		Seeds:             seeds,
		JoinAttempts:      2,
		JoinRetryInterval: 100 * time.Millisecond,
		RaftAddr:          ip + ":9000",
		APIAddr:           ip + ":9001",
		Fingerprint:       "fp-1",
		Version:           "test",
		Profile:           ProfileLAN,
		FailedGrace:       2 * time.Second,
		ReconcileInterval: 200 * time.Millisecond,
		ChangeTimeout:     2 * time.Second,
		Logger:            slog.New(slog.DiscardHandler),
	}
}

func startAgent(t *testing.T, cfg Config, v Voters) *Agent {
	t.Helper()
	a, err := Start(cfg, v)
	if err != nil {
		t.Fatalf("start %s: %v", cfg.NodeID, err)
	}
	t.Cleanup(func() { _ = a.Shutdown() })
	return a
}

func gossipStatusOf(a *Agent, id string) string {
	for _, g := range a.gossip() {
		if g.Name == id {
			return g.Status
		}
	}
	return GossipUnknown
}

func aliveCount(a *Agent) int {
	n := 0
	for _, g := range a.gossip() {
		if g.Status == GossipAlive {
			n++
		}
	}
	return n
}

func join(ss []string) string { return strings.Join(ss, ",") }
