// Package proctest owns what tests need to know about real processes they
// start: whether a process SIGSTOPped has really stopped, whether one has
// exited, and how to wait for a condition about them; and the load loop
// the cluster tests drive them with (StartLoad). Tests only.
package proctest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Stopped reports whether every thread of pid is in the stopped state (T
// in /proc/PID/task/*/stat).
func Stopped(pid int) (bool, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("proctest: %w", err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
		if err != nil {
			return false, nil // the thread is gone or going
		}
		// the state follows the command name in parentheses
		s := string(b)
		if !strings.HasPrefix(strings.TrimSpace(s[strings.LastIndexByte(s, ')')+1:]), "T") {
			return false, nil
		}
	}
	return len(tasks) > 0, nil
}

// WaitStopped polls until every thread of pid is stopped: SIGSTOP returns
// before the process has stopped, and a thread still running could answer
// one more request. It skips t when /proc cannot tell, and fails it after
// 10 s.
func WaitStopped(t testing.TB, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, err := Stopped(pid)
		if err != nil {
			t.Skipf("cannot see whether pid %d stopped: %v", pid, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d did not stop within 10s of SIGSTOP", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Buffer is a bytes.Buffer safe to read while another goroutine writes to
// it: a child process's Stdout or Stderr, which exec copies from its own
// goroutine, or a progress writer.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Gone reports whether pid has exited: no such process, or a zombie (a
// zombie still answers kill(pid, 0) until its parent reaps it).
func Gone(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	return strings.HasPrefix(strings.TrimSpace(s[strings.LastIndexByte(s, ')')+1:]), "Z")
}

// WaitFor polls cond every 20 ms until it holds, and fails t after d naming
// what it waited for.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	WaitEvery(t, d, 20*time.Millisecond, what, cond)
}

// WaitEvery is WaitFor polling every interval (for a cond that is costly).
func WaitEvery(t testing.TB, d, every time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(every)
	}
}

// Load is the load generator of the cluster tests: workers goroutines,
// each calling op(w, i) for i = 0, 1, … until Stop.
type Load struct {
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

// StartLoad starts workers goroutines calling op: worker w calls op(w, 0),
// op(w, 1), … until Stop is called. op must return promptly (bound its
// calls with a timeout).
func StartLoad(workers int, op func(w, i int)) *Load {
	l := &Load{stop: make(chan struct{})}
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				op(w, i)
			}
		}()
	}
	return l
}

// Stop ends the load and waits until every worker has returned; calling
// it again only waits.
func (l *Load) Stop() {
	l.once.Do(func() { close(l.stop) })
	l.wg.Wait()
}
