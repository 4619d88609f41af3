package host_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/writ-dev/writ/internal/proctest"
	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/plugins/host"
)

// TestRestartReverifiesChecksum replaces the plugin binary while the plugin
// runs, then kills it: the restart must refuse the changed binary (the host
// stays down, items get EvalUnavailable, the last error says why) and keep
// retrying with backoff until the right binary is back.
func TestRestartReverifiesChecksum(t *testing.T) {
	t.Parallel()
	self, sum := selfPlugin(t)
	dir := t.TempDir()
	good, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "plugin")
	if err := os.WriteFile(bin, good, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := config(t)
	cfg.Plugins = []host.PluginConfig{{Path: bin, SHA256: sum, Args: []string{pluginFlag + "ok"}}}
	h, err := host.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	pid := h.Status()[0].PID

	// Swap in a different binary (rename: the running one is untouched).
	bad := filepath.Join(dir, "plugin.bad")
	if err := os.WriteFile(bad, append(append([]byte(nil), good...), 0), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(bad, bin); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	proctest.WaitFor(t, 40*time.Second, "a refused restart", func() bool {
		st := h.Status()[0]
		return !st.Healthy && strings.Contains(st.LastError, "restart failed") && strings.Contains(st.LastError, "checksum mismatch")
	})
	res, err := h.Evaluate(context.Background(), []pipeline.EvalItem{putItem("r1", "a", "1", kv.Record{Key: "a"})})
	if err != nil || res[0].Err == nil || res[0].Err.Kind != pipeline.EvalUnavailable {
		t.Fatalf("while down: %+v %v", res, err)
	}

	// Put the right binary back: the next attempt succeeds.
	fixed := filepath.Join(dir, "plugin.good")
	if err := os.WriteFile(fixed, good, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(fixed, bin); err != nil {
		t.Fatal(err)
	}
	proctest.WaitFor(t, 40*time.Second, "a successful restart", func() bool {
		st := h.Status()[0]
		return st.Healthy && st.Restarts == 1
	})
	res, err = h.Evaluate(context.Background(), []pipeline.EvalItem{putItem("r2", "a", "1", kv.Record{Key: "a"})})
	if err != nil || res[0].Err != nil {
		t.Fatalf("after restart: %+v %v", res, err)
	}
}
