package host_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/writ-dev/writ/internal/depcheck"
	"github.com/writ-dev/writ/internal/proctest"
	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/pipeline"
	"github.com/writ-dev/writ/plugins/host"
)

func TestImportRules(t *testing.T) {
	depcheck.Forbid(t, "github.com/writ-dev/writ/plugins/host",
		"github.com/writ-dev/writ/raftstore", "github.com/writ-dev/writ/membership", "github.com/spf13/viper")
}

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Logf("plugin: %s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func config(t testing.TB, modes ...string) host.Config {
	path, sum := selfPlugin(t)
	cfg := host.Config{
		Catalog:      newTestCatalog(),
		CallTimeout:  5 * time.Second,
		StartTimeout: 30 * time.Second,
		RestartMin:   50 * time.Millisecond,
		RestartMax:   time.Second,
		LogOutput:    logWriter{t},
	}
	for _, m := range modes {
		cfg.Plugins = append(cfg.Plugins, host.PluginConfig{Path: path, SHA256: sum, Args: []string{"-writ-test-plugin=" + m}})
	}
	return cfg
}

func start(t testing.TB, modes ...string) *host.Host {
	t.Helper()
	h, err := host.New(config(t, modes...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func putItem(id, key, value string, state ...kv.Record) pipeline.EvalItem {
	b, _ := json.Marshal(map[string]string{"key": key, "value": value})
	return pipeline.EvalItem{Type: "test.put", ID: id, Payload: b, State: state}
}

func TestLoadAndEvaluateBatch(t *testing.T) {
	t.Parallel()
	h := start(t, "ok")
	st := h.Status()
	if len(st) != 1 || st[0].Name != "host-test" || st[0].Version != "1.2.3" || !st[0].Healthy || st[0].PID == 0 {
		t.Fatalf("status: %+v", st)
	}
	if got := strings.Join(st[0].Types, ","); got != "test.fact,test.panic,test.put,test.slow" {
		t.Fatalf("types: %s", got)
	}
	items := []pipeline.EvalItem{
		putItem("r1", "a", "1", kv.Record{Key: "a"}),
		putItem("r2", "b", "2", kv.Record{Key: "b", Value: []byte("old"), Rev: 41}),
		putItem("r3", "c", "refuse", kv.Record{Key: "c"}),
		putItem("r4", "d", "4"), // key not given: the handler asks for it
		{Type: "test.fact", ID: "f1", Payload: []byte(`{"key":"i1","to":"B"}`)},
		{Type: "test.put", ID: "r5", Payload: []byte(`{"key":""}`)},
		{Type: "test.undeclared", ID: "x"},
		{Type: "test.cfg", ID: "c1"},
	}
	res, err := h.Evaluate(context.Background(), items)
	if err != nil {
		t.Fatal(err)
	}
	want := func(k int, ok bool, msg string) {
		t.Helper()
		if ok {
			return
		}
		t.Errorf("item %d (%s %s): %s; got %+v (err %+v)", k, items[k].Type, items[k].ID, msg, res[k], res[k].Err)
	}
	w := res[0].Effect.Writes
	want(0, res[0].Err == nil && len(w) == 1 && w[0].Key == "a" && string(w[0].Value) == "1" && w[0].IfRev == 0 && !w[0].Delete && string(res[0].Result) == `{"put":"a"}`, "create guarded by absence")
	w = res[1].Effect.Writes
	want(1, res[1].Err == nil && len(w) == 1 && w[0].IfRev == 41 && string(w[0].Value) == "2", "update guarded by revision 41")
	want(2, res[2].Err != nil && res[2].Err.Kind == pipeline.EvalRule && strings.Contains(res[2].Err.Msg, "refused"), "rule error")
	want(3, res[3].Err == nil && len(res[3].NeedKeys) == 1 && res[3].NeedKeys[0] == "d" && len(res[3].Effect.Writes) == 0, "NeedKeys [d]")
	want(4, res[4].Err == nil && len(res[4].Transitions) == 1 && res[4].Transitions[0] == pipeline.Transition{Machine: "tm", Key: "i1", To: "B"}, "transition tm/i1 → B")
	want(5, res[5].Err != nil && res[5].Err.Kind == pipeline.EvalValidation && strings.Contains(res[5].Err.Msg, `"key"`), "validation error naming the field")
	want(6, res[6].Err != nil && res[6].Err.Kind == pipeline.EvalValidation && strings.Contains(res[6].Err.Msg, "not declared"), "undeclared type")
	want(7, res[7].Err != nil && res[7].Err.Kind == pipeline.EvalInternal && strings.Contains(res[7].Err.Msg, "no plugin serves"), "type served by no plugin")
}

func TestPanicIsErrorForThatItemOnly(t *testing.T) {
	t.Parallel()
	h := start(t, "ok")
	items := []pipeline.EvalItem{
		putItem("r1", "a", "1", kv.Record{Key: "a"}),
		{Type: "test.panic", ID: "p1", Payload: []byte(`{}`)},
		putItem("r2", "b", "2", kv.Record{Key: "b"}),
	}
	res, err := h.Evaluate(context.Background(), items)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || res[2].Err != nil || len(res[0].Effect.Writes) != 1 || len(res[2].Effect.Writes) != 1 {
		t.Fatalf("neighbours of the panicking item failed: %+v / %+v", res[0], res[2])
	}
	if res[1].Err == nil || res[1].Err.Kind != pipeline.EvalInternal || !strings.Contains(res[1].Err.Msg, "panicked") {
		t.Fatalf("panicking item: %+v", res[1])
	}
	// The plugin process survived and keeps serving.
	if st := h.Status()[0]; !st.Healthy || st.Restarts != 0 {
		t.Fatalf("plugin after a handler panic: %+v", st)
	}
	res, _ = h.Evaluate(context.Background(), items[:1])
	if res[0].Err != nil {
		t.Fatalf("after panic: %+v", res[0].Err)
	}
}

func TestMalformedEffectIsInternalForThatItemOnly(t *testing.T) {
	t.Parallel()
	h := start(t, "ok")
	items := []pipeline.EvalItem{
		{Type: "test.fact", ID: "f1", Payload: []byte(`{"key":"i1","to":"NOPE"}`)},
		{Type: "test.fact", ID: "f2", Payload: []byte(`{"key":"i2","to":"B"}`)},
	}
	res, err := h.Evaluate(context.Background(), items)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err == nil || res[0].Err.Kind != pipeline.EvalInternal || !strings.Contains(res[0].Err.Msg, `no such state`) {
		t.Fatalf("undeclared target state: %+v", res[0])
	}
	if res[1].Err != nil || len(res[1].Transitions) != 1 {
		t.Fatalf("neighbour: %+v", res[1])
	}
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	path, sum := selfPlugin(t)
	dir := t.TempDir()
	notExec := filepath.Join(dir, "plugin-not-exec")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wrongSum := strings.Repeat("ab", 32)
	cases := []struct {
		name    string
		plugins []host.PluginConfig
		want    []string
	}{
		{"missing binary", []host.PluginConfig{{Path: filepath.Join(dir, "nope"), SHA256: sum}}, []string{"nope", "does not exist"}},
		{"not executable", []host.PluginConfig{{Path: notExec, SHA256: sum}}, []string{"plugin-not-exec", "not executable"}},
		{"bad checksum syntax", []host.PluginConfig{{Path: path, SHA256: "xyz"}}, []string{"64 hex digits"}},
		{"checksum mismatch", []host.PluginConfig{{Path: path, SHA256: wrongSum, Args: []string{pluginFlag + "ok"}}}, []string{"checksum mismatch", sum, wrongSum}},
		{"stdout noise", []host.PluginConfig{{Path: path, SHA256: sum, Args: []string{pluginFlag + "noise"}}}, []string{"stdout before the go-plugin handshake", "hello from a chatty plugin"}},
		{"wrong protocol", []host.PluginConfig{{Path: path, SHA256: sum, Args: []string{pluginFlag + "proto1"}}}, []string{"another handler protocol version", "Plugin version: 1", "version(s) [2]"}},
		{"wrong fingerprint", []host.PluginConfig{{Path: path, SHA256: sum, Args: []string{pluginFlag + "badfp"}}}, []string{`"host-test"`, "fp-something-else", testFingerprint}},
		{"unknown type", []host.PluginConfig{{Path: path, SHA256: sum, Args: []string{pluginFlag + "unknowntype"}}}, []string{`"host-test"`, `"test.nope"`, "does not declare"}},
		{"receipt type", []host.PluginConfig{{Path: path, SHA256: sum, Args: []string{pluginFlag + "receipt"}}}, []string{`"test.batch"`, "receipt", `"test.put"`}},
		{"exits early", []host.PluginConfig{{Path: path, SHA256: sum, Args: []string{pluginFlag + "exit"}}}, []string{"exited before the handshake", "no configuration"}},
		{"type not served", []host.PluginConfig{{Path: path, SHA256: sum, Args: []string{pluginFlag + "partial"}}}, []string{"test.slow (request)", "test.fact (fact)", "test.panic (request)"}},
		{"type served twice", []host.PluginConfig{
			{Path: path, SHA256: sum, Args: []string{pluginFlag + "ok"}},
			{Path: path, SHA256: sum, Args: []string{pluginFlag + "ok"}},
		}, []string{"served by both", "exactly one"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := config(t)
			cfg.Plugins = c.plugins
			h, err := host.New(cfg)
			if err == nil {
				h.Close()
				t.Fatal("plugin was accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if strings.Count(err.Error(), "\n") > 0 {
				t.Errorf("refusal is not one line: %q", err)
			}
		})
	}
}

func TestTwoPluginsOneCallEach(t *testing.T) {
	t.Parallel()
	h := start(t, "partial", "rest")
	st := h.Status()
	if len(st) != 2 || st[0].PID == st[1].PID {
		t.Fatalf("status: %+v", st)
	}
	res, err := h.Evaluate(context.Background(), []pipeline.EvalItem{
		putItem("r1", "a", "1", kv.Record{Key: "a"}),
		{Type: "test.fact", ID: "f1", Payload: []byte(`{"key":"i1","to":"B"}`)},
		putItem("r2", "b", "2", kv.Record{Key: "b"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || res[1].Err != nil || res[2].Err != nil || len(res[1].Transitions) != 1 || len(res[2].Effect.Writes) != 1 {
		t.Fatalf("results: %+v", res)
	}
}

func TestKilledMidCallIsUnavailableThenRestarted(t *testing.T) {
	t.Parallel()
	h := start(t, "ok")
	pid := h.Status()[0].PID
	marker := filepath.Join(t.TempDir(), "started")
	payload, _ := json.Marshal(map[string]string{"key": "s", "marker": marker})
	type answer struct {
		res []pipeline.EvalResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := h.Evaluate(context.Background(), []pipeline.EvalItem{
			{Type: "test.slow", ID: "s1", Payload: payload},
			putItem("r1", "a", "1", kv.Record{Key: "a"}),
		})
		done <- answer{res, err}
	}()
	proctest.WaitFor(t, 30*time.Second, "the slow handler to start", func() bool { _, err := os.Stat(marker); return err == nil })
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var a answer
	select {
	case a = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Evaluate did not return within 5s of the plugin being killed")
	}
	t.Logf("Evaluate returned %s after SIGKILL", time.Since(killed))
	if a.err != nil {
		t.Fatal(a.err)
	}
	for k, r := range a.res {
		if r.Err == nil || r.Err.Kind != pipeline.EvalUnavailable {
			t.Fatalf("item %d: want EvalUnavailable, got %+v", k, r)
		}
	}
	proctest.WaitFor(t, 30*time.Second, "the plugin to be restarted", func() bool {
		st := h.Status()[0]
		return st.Healthy && st.Restarts == 1
	})
	st := h.Status()[0]
	if st.PID == pid || st.PID == 0 || !strings.Contains(st.LastError, "connection lost") && !strings.Contains(st.LastError, "exited") {
		t.Fatalf("status after restart: %+v", st)
	}
	res, err := h.Evaluate(context.Background(), []pipeline.EvalItem{putItem("r2", "a", "1", kv.Record{Key: "a"})})
	if err != nil || res[0].Err != nil || len(res[0].Effect.Writes) != 1 {
		t.Fatalf("restarted plugin does not serve: %+v %v", res, err)
	}
}

func TestIdleCrashDetectedAndRestarted(t *testing.T) {
	t.Parallel()
	h := start(t, "ok")
	pid := h.Status()[0].PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	proctest.WaitFor(t, 30*time.Second, "the plugin to be restarted", func() bool {
		st := h.Status()[0]
		return st.Healthy && st.Restarts == 1 && st.PID != pid
	})
	res, err := h.Evaluate(context.Background(), []pipeline.EvalItem{putItem("r1", "a", "1", kv.Record{Key: "a"})})
	if err != nil || res[0].Err != nil {
		t.Fatalf("after restart: %+v %v", res, err)
	}
}

func TestCallTimeoutMarksPluginDown(t *testing.T) {
	t.Parallel()
	cfg := config(t, "ok")
	cfg.CallTimeout = 300 * time.Millisecond
	h, err := host.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	start := time.Now()
	res, err := h.Evaluate(context.Background(), []pipeline.EvalItem{{Type: "test.slow", ID: "s1", Payload: []byte(`{"key":"s"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err == nil || res[0].Err.Kind != pipeline.EvalUnavailable || !strings.Contains(res[0].Err.Msg, "did not answer") {
		t.Fatalf("hung handler: %+v", res[0])
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("hung call took %s", el)
	}
	proctest.WaitFor(t, 30*time.Second, "restart", func() bool { st := h.Status()[0]; return st.Healthy && st.Restarts == 1 })
}

func TestClosedHostRefusesAndKillsPlugins(t *testing.T) {
	t.Parallel()
	h, err := host.New(config(t, "ok"))
	if err != nil {
		t.Fatal(err)
	}
	pid := h.Status()[0].PID
	h.Close()
	if _, err := h.Evaluate(context.Background(), []pipeline.EvalItem{putItem("r", "a", "1")}); err != host.ErrClosed {
		t.Fatalf("Evaluate after Close: %v", err)
	}
	proctest.WaitFor(t, 5*time.Second, "the plugin process to exit", func() bool { return syscall.Kill(pid, 0) != nil })
}

// TestLargeBatch sends one call far above gRPC's default 4 MiB message
// limit (1000 items with 8 KiB of state each).
func TestLargeBatch(t *testing.T) {
	t.Parallel()
	// The test is about size (8 MiB of state in one call), not speed: an
	// -race build on a loaded machine took longer than the 5s the other
	// tests allow a call.
	cfg := config(t, "ok")
	cfg.CallTimeout = time.Minute
	h, err := host.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	big := []byte(strings.Repeat("x", 8<<10))
	items := make([]pipeline.EvalItem, 1000)
	for k := range items {
		key := "k" + strconv.Itoa(k)
		items[k] = putItem("r"+strconv.Itoa(k), key, "v", kv.Record{Key: key, Value: big, Rev: 9})
	}
	res, err := h.Evaluate(context.Background(), items)
	if err != nil {
		t.Fatal(err)
	}
	for k, r := range res {
		if r.Err != nil || len(r.Effect.Writes) != 1 || r.Effect.Writes[0].IfRev != 9 {
			t.Fatalf("item %d: %+v %v", k, r, r.Err)
		}
	}
}
