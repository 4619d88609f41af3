package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/writ-dev/writ/internal/proctest"
	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/pipeline"
)

// TestAbandonedCallKeepsPluginServing cancels a call while its handler
// runs: the call returns at once as unavailable (definitely not evaluated),
// the plugin is not blamed (no restart), and the next call is served.
func TestAbandonedCallKeepsPluginServing(t *testing.T) {
	t.Parallel()
	h := start(t, "ok")
	pid := h.Status()[0].PID
	marker := filepath.Join(t.TempDir(), "started")
	payload, _ := json.Marshal(map[string]string{"key": "s", "marker": marker})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan []pipeline.EvalResult, 1)
	go func() {
		res, err := h.Evaluate(ctx, []pipeline.EvalItem{{Type: "test.slow", ID: "s1", Payload: payload}})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	proctest.WaitFor(t, 30*time.Second, "the slow handler to start", func() bool { _, err := os.Stat(marker); return err == nil })
	cancel()
	var res []pipeline.EvalResult
	select {
	case res = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Evaluate did not return within 5s of its context being canceled")
	}
	if len(res) != 1 || res[0].Err == nil || res[0].Err.Kind != pipeline.EvalUnavailable || !strings.Contains(res[0].Err.Msg, "abandoned") {
		t.Fatalf("abandoned call: %+v", res)
	}
	for range 3 {
		res, err := h.Evaluate(context.Background(), []pipeline.EvalItem{putItem("r1", "a", "1", kv.Record{Key: "a"})})
		if err != nil || res[0].Err != nil || len(res[0].Effect.Writes) != 1 {
			t.Fatalf("after an abandoned call: %+v %v", res, err)
		}
	}
	if st := h.Status()[0]; !st.Healthy || st.Restarts != 0 || st.PID != pid {
		t.Fatalf("an abandoned call must not restart the plugin: %+v", st)
	}
}

// TestConcurrentCallsStayPositional runs many batches at once (several
// evaluation streams to one plugin): every result must answer its own
// item.
func TestConcurrentCallsStayPositional(t *testing.T) {
	t.Parallel()
	h := start(t, "ok")
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range 20 {
				n := 1 + (g+c)%9
				items := make([]pipeline.EvalItem, n)
				for k := range items {
					key := fmt.Sprintf("k-%d-%d-%d", g, c, k)
					items[k] = putItem(key, key, "v-"+key, kv.Record{Key: key, Rev: uint64(k)})
				}
				res, err := h.Evaluate(context.Background(), items)
				if err != nil {
					t.Error(err)
					return
				}
				for k, r := range res {
					key := items[k].ID
					if r.Err != nil || len(r.Effect.Writes) != 1 || r.Effect.Writes[0].Key != key ||
						string(r.Effect.Writes[0].Value) != "v-"+key || r.Effect.Writes[0].IfRev != uint64(k) {
						t.Errorf("item %s: %+v (err %v)", key, r, r.Err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}
