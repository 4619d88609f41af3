package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/node/config"
)

// startNode builds writd and the writ-jobs plugin and starts one real
// single-node cluster on host (with extra writd flags); it is stopped when
// the test ends.
func startNode(t *testing.T, host string, extra ...string) string {
	t.Helper()
	return startNodeWith(t, host, "github.com/writ-dev/writ/examples/jobs/cmd/writ-jobs", extra...)
}

// startNodeWith is startNode with the handler plugin built from package
// plugin (extra carries --schema for a schema other than jobs).
func startNodeWith(t *testing.T, host, plugin string, extra ...string) string {
	t.Helper()
	addr, _ := startNodeCmd(t, host, plugin, extra...)
	return addr
}

// startNodeCmd is startNodeWith that also returns the writd process.
func startNodeCmd(t *testing.T, host, plugin string, extra ...string) (string, *os.Process) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a real writd process: skipped with -short")
	}
	bin := t.TempDir()
	var out bytes.Buffer
	b := exec.Command("go", "build", "-o", bin+"/", "github.com/writ-dev/writ/cmd/writd", plugin)
	b.Stdout, b.Stderr = &out, &out
	if err := b.Run(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out.String())
	}
	data := t.TempDir()
	addr := host + ":7070"
	// a configured writd runs only plugins pinned by sha256
	pin, err := config.PinPlugin(filepath.Join(bin, path.Base(plugin)))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, "writd"), "--data-dir", data, "--api-addr", addr, "--raft-addr", host+":7071", "--gossip-addr", host+":7072",
		"--plugin", pin.String())
	cmd.Args = append(cmd.Args, extra...)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("writd output:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		code, stdout, _ := run(t, "", "--addr", addr, "--timeout", "1s", "status", "-o", "json")
		if code == 0 && strings.Contains(stdout, `"ready":true`) {
			return addr, cmd.Process
		}
		select {
		case <-done:
			t.Fatalf("writd exited:\n%s", logs.String())
		default:
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("writd not ready:\n%s", logs.String())
	return "", nil
}

// TestCommandsAgainstRealNode runs every writctl command in process
// against a real writd with its real plugin process.
func TestCommandsAgainstRealNode(t *testing.T) {
	addr := startNode(t, "127.0.4.1")
	ctl := func(stdin string, args ...string) (int, string, string) {
		return run(t, stdin, append([]string{"--addr", addr}, args...)...)
	}
	must := func(want int, contains string, args ...string) string {
		t.Helper()
		code, out, errs := ctl("", args...)
		if code != want || !strings.Contains(out+errs, contains) {
			t.Fatalf("writctl %v: exit %d (want %d)\nstdout: %s\nstderr: %s\nwant output containing %q", args, code, want, out, errs, contains)
		}
		return out
	}
	must(0, "leader", "status")
	must(0, "voter", "members")
	must(1, "gossip encryption is not enabled", "keyring", "list")
	must(0, "writ-jobs", "plugins")
	must(0, "COMMITTED", "submit", "queue.control", `{"queue":"q1","action":"create"}`)
	out := must(0, `"outcome":"COMMITTED"`, "-o", "json", "submit", "--id", "req-j1", "job.submit", `{"job_id":"j1","queue":"q1","priority":3,"command":"run"}`)
	var sr struct {
		RequestID string `json:"request_id"`
		Index     string `json:"index"`
	}
	if err := json.Unmarshal([]byte(out), &sr); err != nil || sr.RequestID != "req-j1" {
		t.Fatalf("submit -o json: %v %q", err, out)
	}
	// payload from stdin
	if code, o, e := ctl(`{"job_id":"j2","queue":"q1","priority":1,"command":"run"}`, "submit", "job.submit", "-"); code != 0 {
		t.Fatalf("submit from stdin: %d %s %s", code, o, e)
	}
	// REJECTED: exit 3, the field is named
	must(exitRejected, `field "priority"`, "submit", "job.submit", `{"job_id":"j3","queue":"q1","priority":5000,"command":"run"}`)
	must(exitRejected, "REJECTED", "report", "job.submit", `{"job_id":"j3","queue":"q1","priority":1,"command":"run"}`)
	must(0, "COMMITTED", "outcome", "req-j1")
	must(exitError, "no recorded outcome", "outcome", "never-sent")
	must(0, "COMMITTED", "submit", "worker.join", `{"worker_id":"w1","capacity":2}`)
	must(0, "RECEIVED", "deliver", "job.dispatch", `{"dispatch_id":"d1","scheduler":"s","items":[{"job_id":"j1","worker_id":"w1"}]}`)
	must(0, "job.assign", "watch", "--from", "1", "--type", "job.assign", "--count", "1", "--for", "10s")
	must(0, "RECEIVED fact r1", "report", "job.state_report", `{"report_id":"r1","job_id":"j1","state":"RUNNING","seq":1,"worker_id":"w1"}`)
	must(0, "RECEIVED fact r2", "report", "job.state_report", `{"report_id":"r2","job_id":"j1","state":"COMPLETED","seq":2,"worker_id":"w1"}`)
	waitFor(t, func() bool { c, o, _ := ctl("", "get", "_m/job/j1"); return c == 0 && strings.Contains(o, "COMPLETED") })
	must(0, "RECEIVED fact r3", "report", "job.state_report", `{"report_id":"r3","job_id":"j1","state":"RUNNING","seq":3,"worker_id":"w1"}`)
	waitFor(t, func() bool { c, o, _ := ctl("", "conflicts"); return c == 0 && strings.Contains(o, "1 open conflict") })
	must(0, "degraded", "status")
	must(0, "outbox of node1", "facts")
	must(0, "COMMITTED", "outcome", "fact:job.state_report:r1")
	must(0, `"state":"PENDING"`, "get", "job/j2")
	must(exitError, "not found", "get", "job/nope")
	out = must(0, "job/j1", "list", "job/", "-o", "json")
	var recs []map[string]any
	if err := json.Unmarshal([]byte(out), &recs); err != nil || len(recs) != 2 {
		t.Fatalf("list -o json: %v %s", err, out)
	}
	// the binary encoding travels through the API to the write path
	td, ok := jobsgen.Catalog().Type("job.submit")
	if !ok {
		t.Fatal("job.submit not in the catalog")
	}
	pl, err := td.ParseJSON([]byte(`{"job_id":"bin1","queue":"q1","priority":2,"command":"run"}`))
	if err != nil {
		t.Fatal(err)
	}
	bin, err := pl.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := writv1.NewWritClient(conn).Submit(ctx, &writv1.SubmitRequest{Entry: &writv1.Entry{Type: "job.submit", Payload: bin, Encoding: writv1.Encoding_BINARY}})
	if err != nil || r.Outcome != writv1.Outcome_COMMITTED {
		t.Fatalf("binary submit: %v %v", r, err)
	}
	must(0, `"priority":2`, "get", "job/bin1")
	_, err = writv1.NewWritClient(conn).Submit(ctx, &writv1.SubmitRequest{Entry: &writv1.Entry{Type: "job.submit", Payload: bin[:len(bin)/2], Encoding: writv1.Encoding_BINARY}})
	if d, ok := api.OutcomeFromError(err); !ok || d.Outcome != writv1.Outcome_REJECTED {
		t.Fatalf("truncated binary payload: %v", err)
	}
	must(0, `tag "0"`, "config", "show")
	f := filepath.Join(t.TempDir(), "up.yaml")
	if err := os.WriteFile(f, []byte("version: \"2\"\nsettings:\n  commit_timeout: 5s\n  max_batch: 256\n  log_level: warn\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out = must(0, "RELOADED", "config", "upgrade", "--file", f)
	if !strings.Contains(out, `settings.log_level`) || !strings.Contains(out, "STAGED") || !strings.Contains(out, "ACTIVATED") {
		t.Fatalf("upgrade output lacks diff or phases:\n%s", out)
	}
	must(0, `tag "2"`, "config", "show")
	must(0, "nothing to change", "config", "upgrade", "--file", f)
	out = must(0, `"ops_per_sec"`, "bench", "--clients", "4", "--ops", "40", "-o", "json")
	var br BenchResult
	if err := json.Unmarshal([]byte(out), &br); err != nil || br.Outcomes["COMMITTED"] != 40 || br.OpsPerSec <= 0 || br.P99 < br.P50 {
		t.Fatalf("bench: %v %+v", err, br)
	}
	out = must(0, "RECEIVED", "bench", "--type", "job.state_report", "--clients", "4", "--ops", "20", "--size", "64")
	if !strings.Contains(out, "ops/s") || !strings.Contains(out, "p99") {
		t.Fatalf("bench text output: %s", out)
	}
	// every reported fact was committed, none left as a conflict by bench
	waitFor(t, func() bool { c, o, _ := ctl("", "facts"); return c == 0 && strings.Contains(o, ": 0 facts") })
	must(0, "1 open conflict", "conflicts")
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal(fmt.Errorf("condition not met within 15s"))
		case <-time.After(100 * time.Millisecond):
		}
	}
}
