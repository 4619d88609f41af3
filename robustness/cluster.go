package robustness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/internal/procenv"
	"github.com/writ-dev/writ/node/config"
)

// Timing is the cluster's timing, drawn per seed.
type Timing struct {
	Tick            time.Duration `json:"tick"`
	ElectionTicks   int           `json:"election_ticks"`
	SnapshotEntries int           `json:"snapshot_entries"`
	CommitTimeout   time.Duration `json:"commit_timeout"`
}

// Election is the election timeout the timing gives.
func (t Timing) Election() time.Duration { return t.Tick * time.Duration(t.ElectionTicks) }

// Node is one real writd process.
type Node struct {
	Name, Host        string
	API, Raft, Gossip string
	Dir, Log          string

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
	expected bool     // the next exit is the nemesis' or the shutdown's
	stopped  bool     // SIGSTOPped
	exits    []string // exits nobody caused
	// joinExits are exits with writd's documented seed-join failure: a
	// restarted node that cannot reach its gossip seed (killed or
	// partitioned away too) exits 2, and the heal restarts it as a
	// supervisor would.
	joinExits  []string
	joinExited bool // the last exit was one; waitReady restarts the node
	logf       *os.File
	conn       *grpc.ClientConn
	client     writv1.WritClient
}

// Client is the node's API client.
func (n *Node) Client() writv1.WritClient { return n.client }

// Running reports whether the process is up (possibly stopped).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

// Cluster is a cluster of real writd processes, one per host address.
type Cluster struct {
	bins Binaries
	// plugins are the --plugin values PATH=SHA256: a configured writd
	// runs only plugins pinned by sha256 (docs/security.md).
	plugins   []string
	schemaDir string
	root      string
	timing    Timing
	nodes     []*Node
}

// ports are fixed per host: every node has its own address.
const (
	apiPort    = 7301
	raftPort   = 7302
	gossipPort = 7303
)

// StartCluster starts one writd per host in root/<node>, the first
// bootstrapping and the others joining it, and waits until every node is
// ready and a voter.
func StartCluster(ctx context.Context, bins Binaries, schemaDir, root string, hosts []string, t Timing) (*Cluster, error) {
	c := &Cluster{bins: bins, schemaDir: schemaDir, root: root, timing: t}
	for _, p := range bins.Plugins {
		pin, err := config.PinPlugin(p)
		if err != nil {
			return c, fmt.Errorf("robustness: %w", err)
		}
		c.plugins = append(c.plugins, pin.String())
	}
	for i, h := range hosts {
		name := "n" + strconv.Itoa(i+1)
		n := &Node{Name: name, Host: h, Dir: filepath.Join(root, name), Log: filepath.Join(root, name+".log"),
			API:    net.JoinHostPort(h, strconv.Itoa(apiPort)),
			Raft:   net.JoinHostPort(h, strconv.Itoa(raftPort)),
			Gossip: net.JoinHostPort(h, strconv.Itoa(gossipPort))}
		conn, err := grpc.NewClient(n.API, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return c, fmt.Errorf("robustness: client for %s: %w", n.API, err)
		}
		n.conn, n.client = conn, writv1.NewWritClient(conn)
		c.nodes = append(c.nodes, n)
	}
	for i, n := range c.nodes {
		if err := c.Start(n); err != nil {
			return c, err
		}
		if i == 0 {
			if err := c.waitReady(ctx, n, 30*time.Second); err != nil {
				return c, err
			}
		}
	}
	if err := c.WaitHealthy(ctx, 60*time.Second); err != nil {
		return c, err
	}
	return c, c.waitVoters(ctx, len(c.nodes), 60*time.Second)
}

// Nodes are the cluster's nodes.
func (c *Cluster) Nodes() []*Node { return c.nodes }

// Start starts n's process (its data directory is kept across restarts).
func (c *Cluster) Start(n *Node) error {
	if err := os.MkdirAll(n.Dir, 0o700); err != nil {
		return fmt.Errorf("robustness: %w", err)
	}
	args := []string{"--node-id", n.Name, "--data-dir", n.Dir,
		"--api-addr", n.API, "--raft-addr", n.Raft, "--gossip-addr", n.Gossip,
		"--schema", c.schemaDir, "--log-level", "info",
		"--raft-tick", c.timing.Tick.String(), "--raft-election-ticks", strconv.Itoa(c.timing.ElectionTicks),
		"--raft-heartbeat-ticks", "1", "--raft-snapshot-entries", strconv.Itoa(c.timing.SnapshotEntries),
		"--pipeline-commit-timeout", c.timing.CommitTimeout.String(),
		// Gossip notices failures fast; a killed node stays a voter (the
		// nemesis restarts it, it is not replaced).
		"--membership-profile", "local", "--membership-failed-grace", "1h"}
	for _, p := range c.plugins {
		args = append(args, "--plugin", p)
	}
	if n != c.nodes[0] {
		// Plaintext peers and API: the suite tests the write path under
		// faults; the secured configuration has its own tests.
		args = append(args, "--join", c.nodes[0].Gossip, "--insecure")
	}
	lf, err := os.OpenFile(n.Log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("robustness: %w", err)
	}
	cmd := exec.Command(c.bins.Writd, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Env = procenv.Clean()
	if err := cmd.Start(); err != nil {
		lf.Close()
		return fmt.Errorf("robustness: start %s: %w", n.Name, err)
	}
	done := make(chan struct{})
	n.mu.Lock()
	n.cmd, n.done, n.logf, n.expected, n.stopped, n.joinExited = cmd, done, lf, false, false, false
	n.mu.Unlock()
	go func() {
		err := cmd.Wait()
		n.mu.Lock()
		if !n.expected {
			if why, ok := joinFailure(n.Log); ok {
				n.joinExited = true
				n.joinExits = append(n.joinExits, fmt.Sprintf("%s exited (%v) on restart: %s", n.Name, err, why))
			} else {
				n.exits = append(n.exits, fmt.Sprintf("%s exited on its own (%v)", n.Name, err))
			}
		}
		if n.cmd == cmd {
			n.cmd = nil
		}
		n.mu.Unlock()
		lf.Close()
		close(done)
	}()
	return nil
}

func (n *Node) signal(sig syscall.Signal, exit bool) (chan struct{}, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return nil, fmt.Errorf("robustness: %s is not running", n.Name)
	}
	if exit {
		n.expected = true
	}
	switch sig {
	case syscall.SIGSTOP:
		n.stopped = true
	case syscall.SIGCONT:
		n.stopped = false
	}
	return n.done, n.cmd.Process.Signal(sig)
}

// Kill SIGKILLs n and waits for the process to end.
func (c *Cluster) Kill(n *Node) error {
	done, err := n.signal(syscall.SIGKILL, true)
	if err != nil {
		return err
	}
	<-done
	return nil
}

// Pause SIGSTOPs n; Resume SIGCONTs it.
func (c *Cluster) Pause(n *Node) error { _, err := n.signal(syscall.SIGSTOP, false); return err }

// Resume SIGCONTs n.
func (c *Cluster) Resume(n *Node) error { _, err := n.signal(syscall.SIGCONT, false); return err }

// Heal resumes stopped nodes and starts killed ones.
func (c *Cluster) Heal() error {
	var errs []error
	for _, n := range c.nodes {
		n.mu.Lock()
		stopped, down := n.stopped, n.cmd == nil
		n.mu.Unlock()
		if stopped {
			errs = append(errs, c.Resume(n))
		}
		if down {
			errs = append(errs, c.Start(n))
		}
	}
	return errors.Join(errs...)
}

// joinFailure reports whether the log's tail holds writd's documented
// seed-join failure.
func joinFailure(log string) (string, bool) {
	b, err := os.ReadFile(log)
	if err != nil {
		return "", false
	}
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "could not join any seed") {
			if len(l) > 160 {
				l = l[:160] + "…"
			}
			return l, true
		}
	}
	return "", false
}

// JoinExits are the nodes' exits with the documented seed-join failure.
func (c *Cluster) JoinExits() []string {
	var out []string
	for _, n := range c.nodes {
		n.mu.Lock()
		out = append(out, n.joinExits...)
		n.mu.Unlock()
	}
	return out
}

// Close stops every node at once (SIGINT: stop, still a member; SIGKILL
// after 10 s) and
// closes the clients; it returns the exits nobody caused.
func (c *Cluster) Close() []string {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		n.mu.Lock()
		stopped := n.stopped
		n.mu.Unlock()
		if stopped {
			_ = c.Resume(n)
		}
		done, err := n.signal(syscall.SIGINT, true)
		if err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = c.Kill(n)
			}
		}()
	}
	wg.Wait()
	var exits []string
	for _, n := range c.nodes {
		if n.conn != nil {
			_ = n.conn.Close()
		}
		n.mu.Lock()
		exits = append(exits, n.exits...)
		n.mu.Unlock()
	}
	return exits
}

// Status reads n's status.
func (c *Cluster) Status(ctx context.Context, n *Node) (*writv1.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return n.client.Status(ctx, &writv1.StatusRequest{})
}

func (c *Cluster) waitReady(ctx context.Context, n *Node, d time.Duration) error {
	return poll(ctx, d, func() (bool, string) {
		n.mu.Lock()
		restart := n.cmd == nil && n.joinExited
		n.mu.Unlock()
		if restart {
			// The documented seed-join exit: start it again, as a
			// supervisor would.
			if err := c.Start(n); err != nil {
				return false, err.Error()
			}
		}
		st, err := c.Status(ctx, n)
		switch {
		case err != nil:
			return false, n.Name + ": " + err.Error()
		case !st.Ready:
			return false, n.Name + ": " + st.NotReadyReason
		}
		return true, ""
	})
}

// WaitHealthy waits until every node is ready and one is the leader.
func (c *Cluster) WaitHealthy(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for _, n := range c.nodes {
		if err := c.waitReady(ctx, n, time.Until(deadline)); err != nil {
			return err
		}
	}
	_, err := c.Leader(ctx, time.Until(deadline))
	return err
}

// Leader returns the node that says it is the ready leader.
func (c *Cluster) Leader(ctx context.Context, d time.Duration) (*Node, error) {
	var leader *Node
	err := poll(ctx, d, func() (bool, string) {
		for _, n := range c.nodes {
			n.mu.Lock()
			up := n.cmd != nil && !n.stopped
			n.mu.Unlock()
			if !up {
				continue
			}
			if st, err := c.Status(ctx, n); err == nil && st.IsLeader && st.Ready {
				leader = n
				return true, ""
			}
		}
		return false, "no node is the ready leader"
	})
	return leader, err
}

func (c *Cluster) waitVoters(ctx context.Context, want int, d time.Duration) error {
	return poll(ctx, d, func() (bool, string) {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		m, err := c.nodes[0].client.Members(cctx, &writv1.MembersRequest{})
		if err != nil {
			return false, err.Error()
		}
		v := 0
		for _, x := range m.Members {
			if x.Role == "voter" {
				v++
			}
		}
		return v == want, fmt.Sprintf("%d of %d voters", v, want)
	})
}

// Converge waits until every node has applied the same index with the same
// state hash and no node's outbox holds a fact; it returns the hash.
func (c *Cluster) Converge(ctx context.Context, d time.Duration) (string, error) {
	var hash string
	err := poll(ctx, d, func() (bool, string) {
		seen := map[string]bool{}
		var desc []string
		for _, n := range c.nodes {
			st, err := c.Status(ctx, n)
			if err != nil {
				return false, n.Name + ": " + err.Error()
			}
			k := fmt.Sprintf("%d/%s", st.StateIndex, st.StateHash)
			desc = append(desc, fmt.Sprintf("%s=%s outbox=%d", n.Name, k, st.OutboxDepth))
			if st.OutboxDepth > 0 {
				return false, strings.Join(desc, " ")
			}
			seen[k] = true
			hash = st.StateHash
		}
		return len(seen) == 1, strings.Join(desc, " ")
	})
	return hash, err
}

// poll calls cond until it holds or d passes; the error carries cond's last
// description.
func poll(ctx context.Context, d time.Duration, cond func() (bool, string)) error {
	deadline := time.Now().Add(d)
	last := ""
	for {
		ok, why := cond()
		if ok {
			return nil
		}
		last = why
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("robustness: not within %s: %s", d.Round(time.Millisecond), last)
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}
