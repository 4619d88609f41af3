//go:build linux

package host_test

import (
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

// TestPluginDiesWithNode kills a node process with SIGKILL (no chance to
// clean up) and checks that its plugin process dies too (Pdeathsig).
func TestPluginDiesWithNode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	node := exec.Command(exe, nodeFlag+dir)
	node.Stderr = logWriter{t}
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = node.Process.Kill(); _ = node.Wait() }()
	var pid int
	proctest.WaitFor(t, 20*time.Second, "the node to start its plugin", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "plugin.pid"))
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("plugin %d is not running: %v", pid, err)
	}
	if err := node.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = node.Wait()
	proctest.WaitFor(t, 5*time.Second, "the plugin to die with its node", func() bool { return proctest.Gone(pid) })
}
