package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/internal/proccluster"
	"github.com/writ-dev/writ/internal/procenv"
)

// binDir holds writd, writctl, writ-jobs, writ-lease and watchload built once for the multi-process tests.
var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

func buildBinaries(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-process test: skipped with -short")
	}
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "writd-test-bin-")
		if binErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", binDir+"/", "github.com/writ-dev/writ/cmd/writd", "github.com/writ-dev/writ/cmd/writctl", "github.com/writ-dev/writ/examples/jobs/cmd/writ-jobs",
			"github.com/writ-dev/writ/cmd/writd/testdata/lease/writ-lease", "github.com/writ-dev/writ/cmd/writd/testdata/rolling/writ-lease-rt", "github.com/writ-dev/writ/cmd/writd/testdata/watchload")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out.String())
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binDir
}

// proc is one real writd node: the fields a test sets before start, and
// the shared node (process, log, client) behind it.
type proc struct {
	t      *testing.T
	name   string
	host   string
	dir    string
	join   string
	args   []string // extra writd flags for this node
	env    []string // extra environment for this node
	node   *proccluster.Node
	conn   *grpc.ClientConn
	client writv1.WritClient
}

func (p *proc) api() string    { return p.host + ":7070" }
func (p *proc) gossip() string { return p.host + ":7072" }

// n is the shared node, made from the test's fields on first use.
func (p *proc) n() *proccluster.Node {
	if p.node == nil {
		p.node = proccluster.NewNode(p.name, p.dir, p.api(), p.host+":7071", p.gossip())
	}
	return p.node
}

// running reports whether the node's process is up.
func (p *proc) running() bool { return p.n().Running() }

// exited is closed when the node's last process has exited.
func (p *proc) exited() <-chan struct{} { return p.n().Done() }

// exitCode is the last exit's code (-1 for a signal or while running).
func (p *proc) exitCode() int { return p.n().ExitCode() }

// pid is the running process's ID.
func (p *proc) pid() int { return p.n().Pid() }

// signal sends sig to the running process.
func (p *proc) signal(sig syscall.Signal) error { return p.n().Signal(sig) }

type cluster struct {
	t     *testing.T
	bin   string
	args  []string // extra writd flags for every node
	nodes []*proc
	// nodeArgs, if set, adds flags for one node (its certificate);
	// dial, if set, is how the harness connects (TLS, credentials).
	nodeArgs func(p *proc) []string
	dial     []grpc.DialOption
}

// newCluster starts n nodes on hosts (one loopback IP each); the first
// bootstraps, the others join through its gossip address.
func newCluster(t *testing.T, hosts ...string) *cluster {
	t.Helper()
	return newClusterArgs(t, nil, hosts...)
}

// newClusterArgs is newCluster with extra writd flags for every node.
func newClusterArgs(t *testing.T, args []string, hosts ...string) *cluster {
	t.Helper()
	return newClusterWith(t, &cluster{args: args}, hosts...)
}

// newClusterWith is newCluster with c's args, nodeArgs and dial options.
func newClusterWith(t *testing.T, c *cluster, hosts ...string) *cluster {
	t.Helper()
	c.t, c.bin = t, buildBinaries(t)
	root := t.TempDir()
	if d := os.Getenv("TESTLOG_WRITD_DIR"); d != "" {
		// keep data and logs for post-mortems
		root = filepath.Join(d, t.Name())
		_ = os.RemoveAll(root)
	}
	// stop the nodes even when a start-up wait below fails the test
	t.Cleanup(c.stopAll)
	for i, h := range hosts {
		p := &proc{t: t, name: fmt.Sprintf("n%d", i+1), host: h, dir: filepath.Join(root, fmt.Sprintf("n%d", i+1))}
		if c.nodeArgs != nil {
			p.args = c.nodeArgs(p)
		}
		if i > 0 {
			p.join = c.nodes[0].gossip()
		}
		c.nodes = append(c.nodes, p)
	}
	start := func(n *proccluster.Node) error {
		for _, p := range c.nodes {
			if p.node == n {
				c.start(p)
			}
		}
		return nil
	}
	if err := c.shared().Bootstrap(context.Background(), start, 20*time.Second, 40*time.Second); err != nil {
		t.Fatal(err)
	}
	return c
}

// shared is the cluster's nodes as the shared harness sees them.
func (c *cluster) shared() *proccluster.Cluster {
	pc := &proccluster.Cluster{StatusTimeout: time.Second}
	for _, p := range c.nodes {
		pc.Nodes = append(pc.Nodes, p.n())
	}
	return pc
}

func (c *cluster) start(p *proc) {
	c.t.Helper()
	n := p.n()
	args := append(n.Flags(logLevel()), "--pipeline-config-timeout", "2s")
	if !hasArg(c.args, "--plugin") && !hasArg(p.args, "--plugin") {
		pins, err := proccluster.PluginFlags(filepath.Join(c.bin, "writ-jobs"))
		if err != nil {
			c.t.Fatal(err)
		}
		args = append(args, pins...)
	}
	if p.join != "" {
		args = append(args, proccluster.JoinFlags(p.join, c.args, p.args)...)
	}
	args = append(append(args, c.args...), p.args...)
	if err := n.Start(proccluster.Spec{Bin: filepath.Join(c.bin, "writd"), Args: args, Env: p.env}); err != nil {
		c.t.Fatal(err)
	}
	if p.conn == nil {
		dial := c.dial
		if dial == nil {
			dial = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
		}
		client, err := n.Dial(dial...)
		if err != nil {
			c.t.Fatal(err)
		}
		p.conn, p.client = n.Conn(), client
	}
}

// logLevel is the nodes' log level: info, or TESTLOG_WRITD_LEVEL.
func logLevel() string {
	if l := os.Getenv("TESTLOG_WRITD_LEVEL"); l != "" {
		return l
	}
	return "info"
}

// cleanEnv drops WRIT_* and WRITCTL_* variables so the test's environment
// cannot configure the nodes or writctl.
func cleanEnv() []string { return procenv.Clean() }

func (c *cluster) kill(p *proc) { _ = p.n().Kill() }

func (c *cluster) stop(p *proc) {
	if killed, _ := p.n().Stop(15 * time.Second); killed {
		c.t.Errorf("%s did not stop on SIGINT within 15s; killed", p.name)
	}
}

func (c *cluster) stopAll() {
	for _, p := range c.nodes {
		c.stop(p)
		p.n().CloseClient()
	}
	if c.t.Failed() {
		for _, p := range c.nodes {
			c.t.Logf("--- %s log tail:\n%s", p.name, strings.Join(p.n().LogTail(30), "\n"))
		}
	}
}

func (c *cluster) status(p *proc) (*writv1.StatusResponse, error) {
	return c.shared().Status(context.Background(), p.n())
}

func (c *cluster) waitReady(p *proc, d time.Duration) {
	c.t.Helper()
	if err := c.shared().WaitReady(context.Background(), p.n(), d); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) waitVoters(n int, d time.Duration) {
	c.t.Helper()
	if err := c.shared().WaitVoters(context.Background(), n, d); err != nil {
		c.t.Fatal(err)
	}
}

// leader returns the node that reports itself leader, waiting up to d.
func (c *cluster) leader(d time.Duration) *proc {
	c.t.Helper()
	n, err := c.shared().Leader(context.Background(), d)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, p := range c.nodes {
		if p.node == n {
			return p
		}
	}
	return nil
}

func submit(p *proc, typ, payload string, timeout time.Duration) (*writv1.SubmitResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout+2*time.Second)
	defer cancel()
	return p.client.Submit(ctx, &writv1.SubmitRequest{Entry: &writv1.Entry{Type: typ, Payload: []byte(payload)}, TimeoutMs: uint32(timeout.Milliseconds())})
}

func report(p *proc, typ, payload string) (*writv1.ReportResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return p.client.Report(ctx, &writv1.ReportRequest{Entry: &writv1.Entry{Type: typ, Payload: []byte(payload)}})
}

// converge waits until every running node reports the same applied index
// and state hash, and returns "index/hash".
func (c *cluster) converge(d time.Duration) string {
	c.t.Helper()
	key, err := c.shared().Converge(context.Background(), d, false)
	if err != nil {
		c.t.Fatal(err)
	}
	return key
}

func hasArg(args []string, name string) bool {
	for _, a := range args {
		if a == name {
			return true
		}
	}
	return false
}
