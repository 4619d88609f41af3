package robustness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/client"
	"github.com/writ-dev/writ/internal/proccluster"
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

// Node is one real writd process (the shared harness's node) at its own
// host address, with the exits nobody caused.
type Node struct {
	*proccluster.Node
	Host string

	mu    sync.Mutex
	exits []string // exits nobody caused
	// joinExits are exits with writd's documented seed-join failure: a
	// restarted node that cannot reach its gossip seed (killed or
	// partitioned away too) exits 2, and the heal restarts it as a
	// supervisor would.
	joinExits  []string
	joinExited bool // the last exit was one; waitReady restarts the node
	// fatalExpected: a disk fault makes the node stop by itself; its exit
	// is check fsync-error-stops's, not an exit nobody caused.
	fatalExpected bool
	// wiped: its data directory was wiped (replace-node); it joins through
	// another node from then on, even the bootstrap node.
	wiped  bool
	client writv1.WritClient
	// stream is the Go client behind client when the node's writes go on
	// a Write stream (streamHost); nil otherwise.
	stream *client.Client
	// metrics is the node's metrics listener (pprof on), which the
	// sampler reads goroutine counts from.
	metrics string
}

// Cluster is a cluster of real writd processes, one per host address.
type Cluster struct {
	bins Binaries
	// plugins are the --plugin PATH=SHA256 flags: a configured writd
	// runs only plugins pinned by sha256 (docs/security.md).
	plugins   []string
	schemaDir string
	root      string
	timing    Timing
	nodes     []*Node
	pc        *proccluster.Cluster
	// spare is the host address a member added for a while takes
	// (add-remove-member); added counts those added so far (each gets a
	// name of its own).
	spare string
	added int
}

// ports are fixed per host: every node has its own address.
const (
	apiPort     = 7301
	raftPort    = 7302
	gossipPort  = 7303
	metricsPort = 7304
)

// StartCluster starts one writd per host in root/<node>, the first
// bootstrapping and the others joining it, and waits until every node is
// ready and a voter, and one is the leader.
func StartCluster(ctx context.Context, bins Binaries, schemaDir, root string, hosts []string, t Timing) (*Cluster, error) {
	c := &Cluster{bins: bins, schemaDir: schemaDir, root: root, timing: t, spare: spareHost(hosts),
		pc: &proccluster.Cluster{PollEvery: 50 * time.Millisecond}}
	// The documented seed-join exit: start the node again, as a
	// supervisor would, and keep waiting.
	c.pc.WhileDown = func(pn *proccluster.Node) error {
		n := c.node(pn)
		n.mu.Lock()
		restart := n.joinExited
		n.mu.Unlock()
		if restart && !pn.Running() {
			return c.Start(n)
		}
		return nil
	}
	var err error
	if c.plugins, err = proccluster.PluginFlags(bins.Plugins...); err != nil {
		return c, fmt.Errorf("robustness: %w", err)
	}
	for i, h := range hosts {
		n, err := c.newNode("n"+strconv.Itoa(i+1), h)
		if err != nil {
			return c, err
		}
		c.nodes = append(c.nodes, n)
		c.pc.Nodes = append(c.pc.Nodes, n.Node)
	}
	start := func(pn *proccluster.Node) error { return c.Start(c.node(pn)) }
	if err := c.pc.Bootstrap(ctx, start, 30*time.Second, 60*time.Second); err != nil {
		return c, fmt.Errorf("robustness: %w", err)
	}
	return c, c.WaitHealthy(ctx, 60*time.Second)
}

// newNode is a node (not started) named name at host h, its data
// directory root/name.
func (c *Cluster) newNode(name, h string) (*Node, error) {
	n := &Node{Host: h, Node: proccluster.NewNode(name, filepath.Join(c.root, name),
		net.JoinHostPort(h, strconv.Itoa(apiPort)), net.JoinHostPort(h, strconv.Itoa(raftPort)), net.JoinHostPort(h, strconv.Itoa(gossipPort))),
		metrics: net.JoinHostPort(h, strconv.Itoa(metricsPort))}
	var err error
	if n.client, err = n.Dial(grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		return nil, fmt.Errorf("robustness: %w", err)
	}
	if streamHost(h) {
		// The clients of every other host send their writes on a Write
		// stream (the Go client's Config.Stream), so that faults hit
		// streams as well as unary calls.
		cl, err := client.New(client.Config{Endpoints: []string{n.API}, Stream: true})
		if err != nil {
			return nil, fmt.Errorf("robustness: %w", err)
		}
		n.client, n.stream = cl.Raw(), cl
	}
	return n, nil
}

// streamHost says whether the workload writes to the node at host h on a
// Write stream: the hosts whose last address byte is odd.
func streamHost(h string) bool {
	ip := net.ParseIP(h).To4()
	return ip != nil && ip[3]%2 == 1
}

// spareHost is the address after the last of hosts (127.0.47.3 →
// 127.0.47.4): each tier's lanes leave it free for a member added for a
// while.
func spareHost(hosts []string) string {
	if len(hosts) == 0 {
		return ""
	}
	ip := net.ParseIP(hosts[len(hosts)-1]).To4()
	if ip == nil || ip[3] == 255 {
		return ""
	}
	return net.IPv4(ip[0], ip[1], ip[2], ip[3]+1).String()
}

// node is the suite's node for the shared one.
func (c *Cluster) node(pn *proccluster.Node) *Node {
	for _, n := range c.nodes {
		if n.Node == pn {
			return n
		}
	}
	panic("robustness: unknown node " + pn.Name)
}

// Nodes are the cluster's nodes.
func (c *Cluster) Nodes() []*Node { return c.nodes }

// Start starts n's process (its data directory is kept across restarts).
func (c *Cluster) Start(n *Node) error {
	args := append(n.Flags("info"),
		"--schema", c.schemaDir,
		"--raft-tick", c.timing.Tick.String(), "--raft-election-ticks", strconv.Itoa(c.timing.ElectionTicks),
		"--raft-heartbeat-ticks", "1", "--raft-snapshot-entries", strconv.Itoa(c.timing.SnapshotEntries),
		"--pipeline-commit-timeout", c.timing.CommitTimeout.String(),
		// Gossip notices failures fast; a killed node stays a voter (the
		// nemesis restarts it, it is not replaced).
		"--membership-profile", "local", "--membership-failed-grace", "1h",
		// The sampler reads goroutine counts from pprof.
		"--metrics-addr", n.metrics, "--debug-pprof")
	args = append(args, c.plugins...)
	n.mu.Lock()
	n.joinExited = false
	wiped := n.wiped
	n.mu.Unlock()
	if n != c.nodes[0] || wiped {
		// Plaintext peers and API: the suite tests the write path under
		// faults; the secured configuration has its own tests.
		seed := c.nodes[0]
		if n == seed {
			seed = c.nodes[1]
		}
		args = append(args, proccluster.JoinFlags(seed.Gossip)...)
	}
	if err := n.Start(proccluster.Spec{Bin: c.bins.Writd, Args: args, OnExit: n.onExit}); err != nil {
		return fmt.Errorf("robustness: %w", err)
	}
	return nil
}

// onExit records an exit nobody caused, telling the documented seed-join
// failure apart.
func (n *Node) onExit(e proccluster.Exit) {
	if e.Expected {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fatalExpected {
		return
	}
	why, join := joinFailure(n.Log)
	if join {
		n.joinExited = true
		n.joinExits = append(n.joinExits, fmt.Sprintf("%s exited (%v) on restart: %s", n.Name, e.Err, why))
	} else {
		n.exits = append(n.exits, fmt.Sprintf("%s exited on its own (%v)", n.Name, e.Err))
	}
}

// expectFatal says whether n's next exit is one a fault causes.
func (n *Node) expectFatal(on bool) {
	n.mu.Lock()
	n.fatalExpected = on
	n.mu.Unlock()
}

// Kill SIGKILLs n and waits for the process to end.
func (c *Cluster) Kill(n *Node) error {
	if err := n.Node.Kill(); err != nil {
		return fmt.Errorf("robustness: %w", err)
	}
	return nil
}

// Pause SIGSTOPs n; Resume SIGCONTs it.
func (c *Cluster) Pause(n *Node) error { return n.Signal(syscall.SIGSTOP) }

// Resume SIGCONTs n.
func (c *Cluster) Resume(n *Node) error { return n.Signal(syscall.SIGCONT) }

// Heal resumes stopped nodes and starts killed ones.
func (c *Cluster) Heal() error {
	var errs []error
	for _, n := range c.nodes {
		if n.Paused() {
			errs = append(errs, c.Resume(n))
		}
		if !n.Running() {
			errs = append(errs, c.Start(n))
		}
	}
	return errors.Join(errs...)
}

// WaitUp waits up to d until every node's API answers (it has joined:
// writd serves its API only after its gossip join), starting again, as a
// supervisor would, a node whose last exit was writd's documented
// seed-join failure (a restart while its seed was down or cut off), so
// that the next fault finds every node running. Readiness is not
// required: a fault may come while the cluster still recovers.
func (c *Cluster) WaitUp(ctx context.Context, d time.Duration) error {
	return poll(ctx, d, func() (bool, string) {
		for _, n := range c.nodes {
			n.mu.Lock()
			again := n.joinExited
			n.mu.Unlock()
			if !n.Running() {
				if again {
					_ = c.Start(n)
				}
				return false, n.Name + " is not running"
			}
			if _, err := c.Status(ctx, n); err != nil {
				return false, n.Name + ": " + err.Error()
			}
		}
		return true, ""
	})
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

// Close stops every node at once (resumed if paused; SIGINT: stop, still a
// member; SIGKILL after 10 s) and closes the clients; it returns the exits
// nobody caused.
func (c *Cluster) Close() []string {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = n.Stop(10 * time.Second) }()
	}
	wg.Wait()
	var exits []string
	for _, n := range c.nodes {
		if n.stream != nil {
			_ = n.stream.Close()
		}
		n.CloseClient()
		n.mu.Lock()
		exits = append(exits, n.exits...)
		n.mu.Unlock()
	}
	return exits
}

// Status reads n's status.
func (c *Cluster) Status(ctx context.Context, n *Node) (*writv1.StatusResponse, error) {
	return c.pc.Status(ctx, n.Node)
}

// WaitHealthy waits until every node is ready and one is the leader. It
// first waits until every node's API answers, starting again any node
// down with the seed-join exit: nodes restarted at once (kill-all) can all
// exit so while their seed is still starting, and the seed is never ready
// without them.
func (c *Cluster) WaitHealthy(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	if err := c.WaitUp(ctx, d); err != nil {
		return err
	}
	for _, n := range c.nodes {
		if err := c.pc.WaitReady(ctx, n.Node, time.Until(deadline)); err != nil {
			return fmt.Errorf("robustness: %w", err)
		}
	}
	_, err := c.Leader(ctx, time.Until(deadline))
	return err
}

// Leader returns the node that says it is the ready leader.
func (c *Cluster) Leader(ctx context.Context, d time.Duration) (*Node, error) {
	l, err := c.pc.Leader(ctx, d)
	if err != nil {
		return nil, fmt.Errorf("robustness: %w", err)
	}
	return c.node(l), nil
}

// Converge waits until every node has applied the same index with the same
// state hash and no node's outbox holds a fact; it returns the hash.
func (c *Cluster) Converge(ctx context.Context, d time.Duration) (string, error) {
	key, err := c.pc.Converge(ctx, d, true)
	if err != nil {
		return "", fmt.Errorf("robustness: %w", err)
	}
	return key[strings.IndexByte(key, '/')+1:], nil
}

// poll calls cond until it holds or d passes; the error carries cond's last
// description.
func poll(ctx context.Context, d time.Duration, cond func() (bool, string)) error {
	pc := proccluster.Cluster{PollEvery: 50 * time.Millisecond}
	err := pc.Poll(ctx, d, func() (bool, string, error) { ok, why := cond(); return ok, why, nil })
	if err != nil {
		return fmt.Errorf("robustness: %w", err)
	}
	return nil
}
