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

// proc is one real writd process.
type proc struct {
	t      *testing.T
	name   string
	host   string
	dir    string
	join   string
	args   []string // extra writd flags for this node
	env    []string // extra environment for this node
	cmd    *exec.Cmd
	logf   *os.File
	conn   *grpc.ClientConn
	client writv1.WritClient
	done   chan struct{}
}

func (p *proc) api() string    { return p.host + ":7070" }
func (p *proc) gossip() string { return p.host + ":7072" }

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
		c.start(p)
		if i == 0 {
			c.waitReady(p, 20*time.Second)
		}
	}
	for _, p := range c.nodes {
		c.waitReady(p, 40*time.Second)
	}
	c.waitVoters(len(hosts), 40*time.Second)
	return c
}

func (c *cluster) start(p *proc) {
	c.t.Helper()
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		c.t.Fatal(err)
	}
	args := []string{"--node-id", p.name, "--data-dir", p.dir, "--api-addr", p.api(), "--raft-addr", p.host + ":7071",
		"--gossip-addr", p.gossip(), "--log-level", logLevel(), "--pipeline-config-timeout", "2s"}
	if !hasArg(c.args, "--plugin") && !hasArg(p.args, "--plugin") {
		args = append(args, "--plugin", pinned(c.t, filepath.Join(c.bin, "writ-jobs")))
	}
	if p.join != "" {
		args = append(args, "--join", p.join)
		// test clusters run without peer TLS, API TLS or a gossip key
		// unless the test sets them (docs/security.md)
		if !hasArg(c.args, "--insecure") && !hasArg(p.args, "--insecure") {
			args = append(args, "--insecure")
		}
	}
	args = append(append(args, c.args...), p.args...)
	lf, err := os.OpenFile(p.dir+".log", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		c.t.Fatal(err)
	}
	p.logf = lf
	p.cmd = exec.Command(filepath.Join(c.bin, "writd"), args...)
	p.cmd.Stdout, p.cmd.Stderr = lf, lf
	p.cmd.Env = append(cleanEnv(), p.env...)
	if err := p.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	p.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(p.cmd, p.done)
	if p.conn == nil {
		dial := c.dial
		if dial == nil {
			dial = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
		}
		conn, err := grpc.NewClient(p.api(), dial...)
		if err != nil {
			c.t.Fatal(err)
		}
		p.conn, p.client = conn, writv1.NewWritClient(conn)
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

func (c *cluster) kill(p *proc) {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	p.cmd = nil
	_ = p.logf.Close()
}

func (c *cluster) stop(p *proc) {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		c.t.Errorf("%s did not stop on SIGINT within 15s; killing", p.name)
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
	p.cmd = nil
	_ = p.logf.Close()
}

func (c *cluster) stopAll() {
	for _, p := range c.nodes {
		c.stop(p)
		if p.conn != nil {
			_ = p.conn.Close()
		}
	}
	if c.t.Failed() {
		for _, p := range c.nodes {
			b, _ := os.ReadFile(p.dir + ".log")
			lines := strings.Split(string(b), "\n")
			if len(lines) > 30 {
				lines = lines[len(lines)-30:]
			}
			c.t.Logf("--- %s log tail:\n%s", p.name, strings.Join(lines, "\n"))
		}
	}
}

func (c *cluster) status(p *proc) (*writv1.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return p.client.Status(ctx, &writv1.StatusRequest{})
}

func (c *cluster) waitReady(p *proc, d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	var last string
	for time.Now().Before(deadline) {
		st, err := c.status(p)
		if err == nil && st.Ready {
			return
		}
		if err != nil {
			last = err.Error()
		} else {
			last = st.NotReadyReason
		}
		select {
		case <-p.done:
			c.t.Fatalf("%s exited while waiting for readiness", p.name)
		default:
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("%s not ready within %s: %s", p.name, d, last)
}

func (c *cluster) waitVoters(n int, d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		m, err := c.nodes[0].client.Members(ctx, &writv1.MembersRequest{})
		cancel()
		if err == nil {
			v := 0
			for _, x := range m.Members {
				if x.Role == "voter" {
					v++
				}
			}
			if v == n {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("cluster did not reach %d voters within %s", n, d)
}

// leader returns the node that reports itself leader, waiting up to d.
func (c *cluster) leader(d time.Duration) *proc {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for _, p := range c.nodes {
			if p.cmd == nil {
				continue
			}
			if st, err := c.status(p); err == nil && st.IsLeader && st.Ready {
				return p
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("no ready leader within %s", d)
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
// and state hash, and returns the hash.
func (c *cluster) converge(d time.Duration) string {
	c.t.Helper()
	deadline := time.Now().Add(d)
	var last []string
	for time.Now().Before(deadline) {
		last = last[:0]
		hashes := map[string]bool{}
		ok := true
		for _, p := range c.nodes {
			st, err := c.status(p)
			if err != nil {
				ok = false
				break
			}
			key := fmt.Sprintf("%d/%s", st.StateIndex, st.StateHash)
			last = append(last, p.name+"="+key)
			hashes[key] = true
		}
		if ok && len(hashes) == 1 {
			for h := range hashes {
				return h
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	c.t.Fatalf("state did not converge within %s: %v", d, last)
	return ""
}

func hasArg(args []string, name string) bool {
	for _, a := range args {
		if a == name {
			return true
		}
	}
	return false
}
