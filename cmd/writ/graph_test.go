package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var jobsSchema = filepath.Join("..", "..", "examples", "jobs", "schema")

func TestSchemaGraphDot(t *testing.T) {
	var so, se bytes.Buffer
	if rc := run([]string{"schema", "graph", "--schema", jobsSchema}, &so, &se); rc != 0 {
		t.Fatalf("rc %d: %s", rc, se.String())
	}
	out := so.String()
	for _, want := range []string{
		`digraph machines {`, `subgraph "cluster_job"`, `subgraph "cluster_queue"`, `subgraph "cluster_worker"`,
		// a fixed target, a mapped value and an enum field each label the transitions into their state
		`"job.PENDING" -> "job.DISPATCHED" [label="job.assign"];`,
		`"job.PENDING" -> "job.HELD" [label="job.control:hold"];`,
		`"job.RUNNING" -> "job.COMPLETED" [label="job.state_report"];`,
		// creation from the start point into the initial state; terminal states double
		`"job.__start" -> "job.PENDING" [label="job.submit\njob.control:release"];`,
		`"job.CANCELLED" [label="CANCELLED", shape=doublecircle];`,
		// same state name in two machines stays two nodes
		`"queue.DRAINING"`, `"worker.DRAINING"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dot output lacks %s", want)
		}
	}
	if n := strings.Count(out, " -> "); n != 14+5+8+3 {
		t.Errorf("dot output has %d edges, want every transition and one start edge per machine (30)", n)
	}
}

func TestSchemaGraphMermaidAndMachine(t *testing.T) {
	var so, se bytes.Buffer
	if rc := run([]string{"schema", "graph", "--format", "mermaid", "--machine", "worker", "--schema", jobsSchema}, &so, &se); rc != 0 {
		t.Fatalf("rc %d: %s", rc, se.String())
	}
	out := so.String()
	for _, want := range []string{"stateDiagram-v2", `state "machine worker (key worker_id)" as worker {`,
		"[*] --> worker_READY : worker.join, worker.control:undrain", "worker_READY --> worker_DEAD : worker.death", "worker_REMOVED --> [*]"} {
		if !strings.Contains(out, want) {
			t.Errorf("mermaid output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "job_") {
		t.Error("--machine worker drew another machine")
	}
}

func TestSchemaGraphSVG(t *testing.T) {
	var so, se bytes.Buffer
	rc := run([]string{"schema", "graph", "--format", "svg", "--schema", jobsSchema}, &so, &se)
	if _, err := exec.LookPath("dot"); err != nil {
		if rc != 1 || !strings.Contains(se.String(), "install graphviz") {
			t.Fatalf("svg without dot: rc %d, stderr %q", rc, se.String())
		}
		return
	}
	if rc != 0 || !strings.Contains(so.String(), "<svg") || !strings.Contains(so.String(), "job.assign") {
		t.Fatalf("svg: rc %d\n%s", rc, se.String())
	}
}

func TestSchemaGraphBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		rc   int
		want string
	}{
		{[]string{"schema", "graph", "--format", "png"}, 2, `--format "png" is not known (fix: use dot, svg or mermaid)`},
		{[]string{"schema", "graph", "--machine", "nope", "--schema", jobsSchema}, 2, `--machine "nope" is not declared (fix: use one of job, queue, worker)`},
		{[]string{"schema", "graph", "extra"}, 2, "see `writ schema graph --help`"},
		{[]string{"schema", "graph", "--schema", t.TempDir()}, 1, "writ schema graph:"},
	} {
		var so, se bytes.Buffer
		if rc := run(tc.args, &so, &se); rc != tc.rc || !strings.Contains(se.String(), tc.want) {
			t.Errorf("%v: rc %d (want %d), stderr %q (want %q)", tc.args, rc, tc.rc, se.String(), tc.want)
		}
	}
}
