package proccluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/internal/procenv"
)

// Node is one writd node: its addresses, data directory and log, its API
// client, and the process running it now, if any.
type Node struct {
	Name              string
	API, Raft, Gossip string
	// Dir is the data directory; Log (default Dir + ".log") receives the
	// process's stdout and stderr, appended across restarts.
	Dir, Log string

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
	paused   bool // SIGSTOPped through Signal
	expected bool // the caller asked the running process to end
	code     int  // the last exit's code; -1 while running or never run
	// unasked: the last process exited without the caller asking
	unasked bool
	exitErr error
	conn    *grpc.ClientConn
	client  writv1.WritClient
}

// Exit is how a node's process ended.
type Exit struct {
	Err  error // what exec.Cmd.Wait returned
	Code int   // the exit code, -1 for a signal
	// Expected: the caller asked for the exit (Kill, Stop, or Signal with
	// SIGKILL, SIGINT or SIGTERM).
	Expected bool
}

// Spec is how to start a node's process.
type Spec struct {
	Bin  string
	Args []string
	// Env is appended to procenv.Clean().
	Env []string
	// OnExit, if set, sees every exit of the process, before Done is
	// closed and before Running reports false.
	OnExit func(Exit)
}

// closed is Done's channel for a node that never ran.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// NewNode is a node that has not been started; its log is dir + ".log".
func NewNode(name, dir, api, raft, gossip string) *Node {
	return &Node{Name: name, Dir: dir, Log: dir + ".log", API: api, Raft: raft, Gossip: gossip, code: -1}
}

// Flags are the flags that place the node: its ID, data directory and
// addresses, and the log level.
func (n *Node) Flags(logLevel string) []string {
	return []string{"--node-id", n.Name, "--data-dir", n.Dir, "--api-addr", n.API, "--raft-addr", n.Raft,
		"--gossip-addr", n.Gossip, "--log-level", logLevel}
}

// Start starts the node's process (its data directory and log are kept
// across restarts). It fails if the process is already running.
func (n *Node) Start(s Spec) error {
	if err := os.MkdirAll(n.Dir, 0o700); err != nil {
		return fmt.Errorf("proccluster: %s: %w", n.Name, err)
	}
	n.mu.Lock()
	running := n.cmd != nil
	n.mu.Unlock()
	if running {
		return fmt.Errorf("proccluster: start %s: already running", n.Name)
	}
	log := n.Log
	if log == "" {
		log = n.Dir + ".log"
	}
	lf, err := os.OpenFile(log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("proccluster: %s: %w", n.Name, err)
	}
	cmd := exec.Command(s.Bin, s.Args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Env = append(procenv.Clean(), s.Env...)
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		lf.Close()
		return fmt.Errorf("proccluster: start %s: %w", n.Name, err)
	}
	done := make(chan struct{})
	n.mu.Lock()
	n.cmd, n.done, n.paused, n.expected, n.code, n.exitErr, n.unasked = cmd, done, false, false, -1, nil, false
	n.mu.Unlock()
	go n.wait(cmd, lf, done, s.OnExit)
	return nil
}

func (n *Node) wait(cmd *exec.Cmd, lf *os.File, done chan struct{}, onExit func(Exit)) {
	err := cmd.Wait()
	n.mu.Lock()
	exit := Exit{Err: err, Code: cmd.ProcessState.ExitCode(), Expected: n.expected}
	n.mu.Unlock()
	if onExit != nil {
		onExit(exit)
	}
	n.mu.Lock()
	if n.cmd == cmd {
		n.cmd, n.paused, n.code, n.exitErr, n.unasked = nil, false, exit.Code, err, !exit.Expected
	}
	n.mu.Unlock()
	lf.Close()
	close(done)
}

// Running reports whether the node's process is up (possibly paused).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

// Paused reports whether the process was SIGSTOPped and not SIGCONTed.
func (n *Node) Paused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused
}

// Up reports whether the process runs and is not paused.
func (n *Node) Up() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil && !n.paused
}

// Pid is the running process's ID, 0 if none runs.
func (n *Node) Pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Done is closed when the last started process has exited (at once for a
// node never started).
func (n *Node) Done() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.done == nil {
		return closed
	}
	return n.done
}

// ExitCode is the last exit's code: -1 while the process runs, if it never
// ran, or if a signal ended it.
func (n *Node) ExitCode() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.code
}

// ExitedOnItsOwn reports whether the last process has exited without the
// caller asking (Kill, Stop or a terminating Signal).
func (n *Node) ExitedOnItsOwn() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd == nil && n.unasked
}

// ExitErr is what waiting for the last exited process returned.
func (n *Node) ExitErr() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.exitErr
}

// Signal sends sig to the running process. SIGKILL, SIGINT and SIGTERM mark
// the exit expected; SIGSTOP and SIGCONT pause and resume the node.
func (n *Node) Signal(sig syscall.Signal) error {
	_, err := n.signal(sig)
	return err
}

func (n *Node) signal(sig syscall.Signal) (<-chan struct{}, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return nil, fmt.Errorf("proccluster: %s is not running", n.Name)
	}
	switch sig {
	case syscall.SIGKILL, syscall.SIGINT, syscall.SIGTERM:
		n.expected = true
	case syscall.SIGSTOP:
		n.paused = true
	case syscall.SIGCONT:
		n.paused = false
	}
	if err := n.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		// ErrProcessDone: it is exiting already; done is closed soon
		return nil, fmt.Errorf("proccluster: signal %s: %w", n.Name, err)
	}
	return n.done, nil
}

// ErrNotRunning is Kill's and Stop's error for a node with no process.
var ErrNotRunning = errors.New("proccluster: not running")

// Kill SIGKILLs the process and waits until it has exited.
func (n *Node) Kill() error {
	done, err := n.signal(syscall.SIGKILL)
	if err != nil {
		if !n.Running() {
			return fmt.Errorf("%w: %s", ErrNotRunning, n.Name)
		}
		return err
	}
	<-done
	return nil
}

// Stop resumes a paused process, SIGINTs it (writd stops, still a member)
// and waits up to grace for it to exit, then SIGKILLs it; killed says
// whether it had to.
func (n *Node) Stop(grace time.Duration) (killed bool, err error) {
	if n.Paused() {
		_ = n.Signal(syscall.SIGCONT)
	}
	done, err := n.signal(syscall.SIGINT)
	if err != nil {
		if !n.Running() {
			return false, fmt.Errorf("%w: %s", ErrNotRunning, n.Name)
		}
		return false, err
	}
	select {
	case <-done:
		return false, nil
	case <-time.After(grace):
		_ = n.Kill()
		return true, nil
	}
}

// Dial makes the node's API client once; it is kept across restarts.
func (n *Node) Dial(opts ...grpc.DialOption) (writv1.WritClient, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.client == nil {
		conn, err := grpc.NewClient(n.API, opts...)
		if err != nil {
			return nil, fmt.Errorf("proccluster: client for %s: %w", n.API, err)
		}
		n.conn, n.client = conn, writv1.NewWritClient(conn)
	}
	return n.client, nil
}

// Client is the node's API client (nil before Dial).
func (n *Node) Client() writv1.WritClient {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.client
}

// Conn is the client's connection (nil before Dial).
func (n *Node) Conn() *grpc.ClientConn {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.conn
}

// CloseClient closes the API client.
func (n *Node) CloseClient() {
	n.mu.Lock()
	conn := n.conn
	n.mu.Unlock()
	if conn != nil {
		_ = conn.Close()
	}
}

// LogTail is the last lines of the node's log.
func (n *Node) LogTail(lines int) []string {
	b, _ := os.ReadFile(n.Log)
	l := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return l
}
