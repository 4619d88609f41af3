package robustness

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// tracer is a strace process attached to every thread of a running writd
// (and, with -f, to every thread and child it starts later), tampering with
// its fsync and fdatasync calls: delaying them or failing them with EIO.
// Attaching to the running process (rather than starting writd under
// strace) puts the fault in force at a moment the nemesis chooses and lets
// the heal detach it: strace's --seccomp-bpf filter would do neither (it
// applies only to a program strace starts, and a tracee left with the
// filter after strace is gone gets ENOSYS from every filtered call).
type tracer struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}

	mu     sync.Mutex
	stderr bytes.Buffer
}

// straceAvailable reports whether strace can be run, installing it with
// apt-get when it is missing and the process may (root).
func straceAvailable() error { return ensureTool("strace", "strace") }

// attachStrace attaches strace to pid, injecting inject (an `-e inject`
// tail such as "error=EIO" or "delay_enter=50ms") into every fsync and
// fdatasync, or only into those on the files of paths when any are given.
// It returns once strace says it has attached (from then on the injection
// is in force); the calls it tampered with are written to log.
func attachStrace(ctx context.Context, pid int, log, inject string, paths ...string) (*tracer, error) {
	args := []string{"-f", "-o", log, "-e", "signal=none", "-e", "trace=fsync,fdatasync",
		"-e", "inject=fsync,fdatasync:" + inject}
	for _, p := range paths {
		args = append(args, "-P", p)
	}
	args = append(args, "-p", strconv.Itoa(pid))
	t := &tracer{cmd: exec.Command("strace", args...), log: log, done: make(chan struct{})}
	pr, err := t.cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("robustness: strace: %w", err)
	}
	if err := t.cmd.Start(); err != nil {
		return nil, fmt.Errorf("robustness: strace: %w", err)
	}
	attached := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		once := sync.Once{}
		for sc.Scan() {
			t.mu.Lock()
			t.stderr.WriteString(sc.Text() + "\n")
			t.mu.Unlock()
			if strings.Contains(sc.Text(), " attached") {
				once.Do(func() { close(attached) })
			}
		}
		_ = t.cmd.Wait()
		close(t.done)
	}()
	select {
	case <-attached:
		return t, nil
	case <-t.done:
		return nil, fmt.Errorf("robustness: strace -p %d exited before it attached: %s", pid, t.errText())
	case <-time.After(10 * time.Second):
	case <-ctx.Done():
	}
	_ = t.stop(5 * time.Second)
	return nil, fmt.Errorf("robustness: strace -p %d did not attach within 10 s: %s", pid, t.errText())
}

func (t *tracer) errText() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(t.stderr.String())
}

// stop detaches strace (SIGINT: its tracees go on running) and waits up to
// d for it to exit, then kills it (the kernel detaches the tracees then).
func (t *tracer) stop(d time.Duration) error {
	_ = t.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-t.done:
		return nil
	case <-time.After(d):
		_ = t.cmd.Process.Kill()
		<-t.done
		return fmt.Errorf("robustness: strace did not detach within %s", d)
	}
}

// wait waits up to d for strace to exit by itself (its tracee exited), and
// stops it after that.
func (t *tracer) wait(d time.Duration) {
	select {
	case <-t.done:
	case <-time.After(d):
		_ = t.stop(5 * time.Second)
	}
}

// count is how many calls of the log strace marked with marker
// ("(INJECTED)" for a failed call, "(DELAYED)" for a delayed one).
func (t *tracer) count(marker string) int {
	b, err := os.ReadFile(t.log)
	if err != nil {
		return 0
	}
	return bytes.Count(b, []byte(marker))
}
