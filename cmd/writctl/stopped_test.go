package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// waitStopped polls /proc until every thread of pid is stopped: SIGSTOP
// returns before the process has stopped, and a thread still running could
// answer one more request.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	deadline := time.Now().Add(10 * time.Second)
	for {
		tasks, err := os.ReadDir(dir)
		if err != nil {
			t.Skipf("cannot see whether writd stopped: %v", err)
		}
		stopped := len(tasks) > 0
		for _, task := range tasks {
			b, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
			// the state follows the command name in parentheses
			if err != nil || !strings.HasPrefix(strings.TrimSpace(string(b[strings.LastIndexByte(string(b), ')')+1:])), "T") {
				stopped = false
				break
			}
		}
		if stopped {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("writd (pid %d) did not stop within 10s of SIGSTOP", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
