package robustness

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestFaultsInjected_FakeFaults: a fault that could not be injected fails
// the run (faults-injected) instead of letting it pass untested.
func TestFaultsInjected_FakeFaults(t *testing.T) {
	ok := []Fault{{Kind: KillPlugin, Nodes: []string{"n1"}}, {Kind: PartitionOneWay, Nodes: []string{"n2"}}}
	if r := checkFaults(ok); !r.Pass || r.Cases != 2 {
		t.Fatalf("injected faults: %+v", r)
	}
	bad := append(ok, Fault{Kind: KillPlugin, Nodes: []string{"n3"}, Error: "robustness: n3 (pid 7) has no plugin process to kill"})
	r := checkFaults(bad)
	if r.Pass || len(r.Detail) != 1 || !strings.Contains(r.Detail[0], "no plugin process") {
		t.Fatalf("a fault that was not injected must fail the check: %+v", r)
	}
}

// TestChildrenFindsAChildProcess: a process this test starts is listed
// among its children by pid, and nothing is listed for a pid that does
// not exist.
func TestChildrenFindsAChildProcess(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if !slices.Contains(children(os.Getpid()), cmd.Process.Pid) {
		t.Fatalf("child %d not among %v", cmd.Process.Pid, children(os.Getpid()))
	}
	if len(children(1<<30)) != 0 {
		t.Fatal("a pid that does not exist has children")
	}
}
