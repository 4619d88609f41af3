//go:build linux

package proccluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/writ-dev/writ/internal/proctest"
)

// parentEnv makes the test binary act as a harness that starts one node and
// waits to be killed.
const parentEnv = "WRITTEST_PROCCLUSTER_PARENT"

func TestMain(m *testing.M) {
	if dir := os.Getenv(parentEnv); dir != "" {
		n := NewNode("n1", filepath.Join(dir, "n1"), "", "", "")
		if err := n.Start(Spec{Bin: "/bin/sh", Args: []string{"-c", "echo $$ > " + filepath.Join(dir, "node.pid") + "; exec sleep 300"}}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		<-n.Done()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestNodeDiesWithItsHarness SIGKILLs a harness process (no chance to stop
// its nodes) and checks that its node dies too (Pdeathsig): a killed test
// binary does not leak its cluster.
func TestNodeDiesWithItsHarness(t *testing.T) {
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	parent := exec.Command(exe)
	parent.Env = append(os.Environ(), parentEnv+"="+dir)
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = parent.Process.Kill(); _ = parent.Wait() }()
	var pid int
	proctest.WaitFor(t, 20*time.Second, "the harness to start its node", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "node.pid"))
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	defer func() { _ = syscall.Kill(pid, syscall.SIGKILL) }()
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("node %d is not running: %v", pid, err)
	}
	if err := parent.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	proctest.WaitFor(t, 5*time.Second, "the node to die with its harness", func() bool { return proctest.Gone(pid) })
}
