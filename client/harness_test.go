package client_test

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
	"github.com/writ-dev/writ/internal/proctest"
	"github.com/writ-dev/writ/node/config"
)

// The tests here start real writd processes (with the writ-jobs plugin) on
// 127.0.44.x.

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

func buildBinaries(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real writd processes: skipped with -short")
	}
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "writ-client-test-bin-")
		if binErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", binDir+"/", "github.com/writ-dev/writ/cmd/writd", "github.com/writ-dev/writ/examples/jobs/cmd/writ-jobs")
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

// node is one real writd process.
type node struct {
	name, host, dir string
	cmd             *exec.Cmd
	done            chan struct{}
	logf            *os.File
	conn            *grpc.ClientConn
	w               writv1.WritClient
}

func (n *node) api() string { return n.host + ":7070" }

type cluster struct {
	t     *testing.T
	bin   string
	nodes []*node
}

// startCluster starts one node per host; the first bootstraps, the others
// join it. It returns when every node is ready and a voter.
func startCluster(t *testing.T, hosts ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, bin: buildBinaries(t)}
	root := t.TempDir()
	// a configured writd runs only plugins pinned by sha256
	jobs, err := config.PinPlugin(filepath.Join(c.bin, "writ-jobs"))
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range hosts {
		n := &node{name: fmt.Sprintf("n%d", i+1), host: h, dir: filepath.Join(root, fmt.Sprintf("n%d", i+1))}
		args := []string{"--node-id", n.name, "--data-dir", n.dir, "--api-addr", n.api(), "--raft-addr", h + ":7071",
			"--gossip-addr", h + ":7072", "--plugin", jobs.String()}
		if i > 0 {
			args = append(args, "--join", hosts[0]+":7072", "--insecure")
		}
		if err := os.MkdirAll(n.dir, 0o700); err != nil {
			t.Fatal(err)
		}
		lf, err := os.Create(n.dir + ".log")
		if err != nil {
			t.Fatal(err)
		}
		n.logf = lf
		n.cmd = exec.Command(filepath.Join(c.bin, "writd"), args...)
		n.cmd.Stdout, n.cmd.Stderr = lf, lf
		n.cmd.Env = procenv.Clean()
		if err := n.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		n.done = make(chan struct{})
		go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(n.cmd, n.done)
		n.conn, err = grpc.NewClient(n.api(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		n.w = writv1.NewWritClient(n.conn)
		c.nodes = append(c.nodes, n)
		if i == 0 {
			c.waitReady(n)
		}
	}
	t.Cleanup(c.stopAll)
	for _, n := range c.nodes {
		c.waitReady(n)
	}
	c.waitFor("every node a voter", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		m, err := c.nodes[0].w.Members(ctx, &writv1.MembersRequest{})
		if err != nil {
			return false
		}
		v := 0
		for _, x := range m.Members {
			if x.Role == "voter" {
				v++
			}
		}
		return v == len(hosts)
	})
	return c
}

func (c *cluster) status(n *node) (*writv1.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return n.w.Status(ctx, &writv1.StatusRequest{})
}

func (c *cluster) waitReady(n *node) {
	c.t.Helper()
	c.waitFor(n.name+" ready", func() bool {
		select {
		case <-n.done:
			c.t.Fatalf("%s exited", n.name)
		default:
		}
		st, err := c.status(n)
		return err == nil && st.Ready
	})
}

// leader returns the running node that is the ready leader.
func (c *cluster) leader() *node {
	c.t.Helper()
	var l *node
	c.waitFor("a ready leader", func() bool {
		for _, n := range c.nodes {
			if n.cmd == nil {
				continue
			}
			if st, err := c.status(n); err == nil && st.IsLeader && st.Ready {
				l = n
				return true
			}
		}
		return false
	})
	return l
}

// waitFor polls cond every 50ms for up to 40s.
func (c *cluster) waitFor(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(40 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *cluster) signal(n *node, s syscall.Signal) {
	c.t.Helper()
	if err := n.cmd.Process.Signal(s); err != nil {
		c.t.Fatalf("%s: signal %v: %v", n.name, s, err)
	}
}

func (c *cluster) pause(n *node) {
	c.t.Helper()
	c.signal(n, syscall.SIGSTOP)
	proctest.WaitStopped(c.t, n.cmd.Process.Pid)
}

func (c *cluster) kill(n *node) {
	c.signal(n, syscall.SIGKILL)
	<-n.done
	n.cmd = nil
}

func (c *cluster) stopAll() {
	for _, n := range c.nodes {
		if n.cmd != nil {
			_ = n.cmd.Process.Signal(syscall.SIGCONT)
			_ = n.cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-n.done:
			case <-time.After(15 * time.Second):
				_ = n.cmd.Process.Kill()
				<-n.done
			}
			n.cmd = nil
		}
		_ = n.conn.Close()
		_ = n.logf.Close()
	}
	if c.t.Failed() {
		for _, n := range c.nodes {
			b, _ := os.ReadFile(n.dir + ".log")
			lines := strings.Split(string(b), "\n")
			if len(lines) > 40 {
				lines = lines[len(lines)-40:]
			}
			c.t.Logf("--- %s log tail:\n%s", n.name, strings.Join(lines, "\n"))
		}
	}
}
