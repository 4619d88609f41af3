package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/internal/proccluster"
	"github.com/writ-dev/writ/schema/ir"
)

// ClusterOptions configures the cluster tier.
type ClusterOptions struct {
	// Writd is a writd binary. Empty: the writd next to the running
	// executable, else the first on PATH. The nodes run it with --schema
	// (the schema under test) and one --plugin per plugin under test.
	Writd string
	// Plugins are handler plugins besides Options.PluginPath (a schema
	// whose types are served by several plugins); the property tier's
	// plugin host and the cluster's nodes load them all.
	Plugins []string
	// Hosts are the loopback addresses of the 3 nodes (one address is used
	// for all; default 127.0.0.1). Ports are chosen by the kernel.
	Hosts []string
}

// scenario is one cluster scenario; run is nil when the suite does not
// implement it, and the check then reports NOT RUN (never PASS).
type scenario struct {
	id, title  string
	invariants []string
	run        func(ctx context.Context, e *Env, c *cluster) Outcome
	notRun     string
}

var scenarios = []scenario{
	{id: "cluster.reply-after-commit", invariants: []string{"W1"}, title: "a COMMITTED reply names an index the replying node has applied", run: scReplyAfterCommit},
	{id: "cluster.quorum-loss-request", invariants: []string{"W2"}, title: "with quorum lost a request is never COMMITTED; after heal its outcome is queryable", run: scQuorumLossRequest},
	{id: "cluster.facts-quorum-loss", invariants: []string{"W3", "W10"}, title: "facts during quorum loss are received, then committed exactly once after heal without redelivery", run: scFactsQuorumLoss},
	{id: "cluster.facts-restart", invariants: []string{"W3", "W10"}, title: "received facts survive a SIGKILL of the receiving node and commit exactly once", run: scFactsRestart},
	{id: "cluster.receipt-watch", invariants: []string{"W4"}, title: "a receipt reply carries no outcome; item outcomes arrive on watch", run: scReceiptWatch},
	{id: "cluster.config-majority-down", invariants: []string{"W5"}, title: "a config change with a majority down fails definitely and never activates", run: scConfigMajorityDown},
	{id: "cluster.leader-kill", invariants: []string{"W10", "W9"}, title: "leader SIGKILL under load loses no COMMITTED entry; replicas converge", run: scLeaderKill},
	{id: "cluster.undeclared-type", invariants: []string{"W6"}, title: "an undeclared entry type is refused at ingress, never confirmed or retained", run: scUndeclaredType},
	{id: "cluster.commit-timeout", invariants: []string{"W2"}, title: "commit timeout answers UNCERTAIN, rolls provisional state back, and a retry with the same ID is safe", run: scCommitTimeout},
}

func init() {
	for i := range scenarios {
		sc := &scenarios[i]
		register(&Check{ID: sc.id, Tier: TierCluster, Invariants: sc.invariants, Title: sc.title,
			Run: func(ctx context.Context, e *Env) Outcome { return runScenario(ctx, e, sc) }})
	}
}

func runScenario(ctx context.Context, e *Env, sc *scenario) Outcome {
	if sc.run == nil {
		return notRun("%s", sc.notRun)
	}
	if r, ok := e.needSchema(); !ok {
		return notRun("%s", r)
	}
	c, reason := e.startCluster(ctx)
	if c == nil {
		return notRun("%s", reason)
	}
	if err := c.healthy(ctx); err != nil {
		return notRun("the cluster did not recover from the previous scenario: %v", err)
	}
	c.out = Outcome{}
	c.sc = sc.id
	out := sc.run(ctx, e, c)
	if len(out.Findings) == 0 && out.NotRun == "" && out.Cases == 0 {
		return notRun("the scenario exercised nothing")
	}
	return out
}

// node is one real writd process (the shared harness's node).
type node = proccluster.Node

// cluster is an ephemeral 3-node cluster of real writd processes.
type cluster struct {
	bin   string
	args  []string // --schema and --plugin flags of every node
	root  string
	nodes []*node
	pc    *proccluster.Cluster
	out   Outcome
	sc    string
	// watchFails makes every watch call of the fact scenarios fail (a
	// test double, from Options.doubles).
	watchFails bool
}

func (e *Env) startCluster(ctx context.Context) (*cluster, string) {
	if e.cl != nil || e.clErr != "" {
		return e.cl, e.clErr
	}
	c, err := e.newCluster(ctx)
	if err != nil {
		e.clErr = err.Error()
		if c != nil {
			c.close()
		}
		return nil, e.clErr
	}
	e.cl = c
	return c, ""
}

func (e *Env) newCluster(ctx context.Context) (*cluster, error) {
	if len(e.Opts.pluginPaths()) == 0 {
		return nil, errors.New("no plugin given (--plugin PATH)")
	}
	root, err := os.MkdirTemp("", "writ-conformance-cluster-")
	if err != nil {
		return nil, err
	}
	c := &cluster{root: root, watchFails: e.Opts.doubles.watchFails}
	if c.bin, err = e.writdBinary(ctx, root); err != nil {
		return c, err
	}
	if c.args, err = e.writdArgs(); err != nil {
		return c, err
	}
	hosts := e.Opts.Cluster.Hosts
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1"}
	}
	for i := 0; i < 3; i++ {
		h := hosts[i%len(hosts)]
		var addr [3]string
		for j := range addr {
			if addr[j], err = proccluster.FreeAddr(h); err != nil {
				return c, fmt.Errorf("conformance: %w", err)
			}
		}
		name := "n" + strconv.Itoa(i+1)
		c.nodes = append(c.nodes, proccluster.NewNode(name, filepath.Join(root, name), addr[0], addr[1], addr[2]))
	}
	c.pc = &proccluster.Cluster{Nodes: c.nodes, WhileDown: func(n *node) error {
		return fmt.Errorf("writd %s exited while starting (%s)", n.Name, c.exitReason(n))
	}}
	if err := c.pc.Bootstrap(ctx, c.start, 30*time.Second, 60*time.Second); err != nil {
		return c, err
	}
	st, err := c.status(ctx, c.nodes[0])
	if err != nil {
		return c, err
	}
	if want := e.Schema.Fingerprint(); st.SchemaFingerprint != want {
		return c, fmt.Errorf("writd runs schema %s, not this schema (%s): the writd binary ignored --schema (fix: use a writd that supports --schema DIR)", st.SchemaFingerprint, want)
	}
	return c, nil
}

func (c *cluster) start(n *node) error {
	args := append(n.Flags("info"), c.args...)
	if n != c.nodes[0] {
		// conformance clusters run on loopback without peer TLS, API
		// TLS or a gossip key (docs/security.md)
		args = append(args, proccluster.JoinFlags(c.nodes[0].Gossip)...)
	}
	if err := n.Start(proccluster.Spec{Bin: c.bin, Args: args}); err != nil {
		return fmt.Errorf("conformance: %w", err)
	}
	_, err := n.Dial(grpc.WithTransportCredentials(insecure.NewCredentials()))
	return err
}

func (c *cluster) kill(n *node) { _ = n.Kill() }

func (c *cluster) close() {
	for _, n := range c.nodes {
		_, _ = n.Stop(15 * time.Second)
		n.CloseClient()
	}
	os.RemoveAll(c.root)
}

func (c *cluster) status(ctx context.Context, n *node) (*writv1.StatusResponse, error) {
	return c.pc.Status(ctx, n)
}

func (c *cluster) waitReady(ctx context.Context, n *node, d time.Duration) error {
	return c.pc.WaitReady(ctx, n, d)
}

func (c *cluster) logTail(n *node) string {
	return strings.Join(n.LogTail(3), " | ")
}

func (c *cluster) leader(ctx context.Context, d time.Duration) (*node, error) {
	return c.pc.Leader(ctx, d)
}

// healthy restarts any stopped node and waits until all are ready.
func (c *cluster) healthy(ctx context.Context) error {
	for _, n := range c.nodes {
		if !n.Running() {
			if err := c.start(n); err != nil {
				return err
			}
		}
	}
	for _, n := range c.nodes {
		if err := c.waitReady(ctx, n, 60*time.Second); err != nil {
			return err
		}
	}
	_, err := c.leader(ctx, 30*time.Second)
	return err
}

// converge waits until every node has the same applied index and state
// hash.
func (c *cluster) converge(ctx context.Context, d time.Duration) error {
	_, err := c.pc.Converge(ctx, d, false)
	return err
}

func (c *cluster) fail(subject, fix, format string, args ...any) {
	c.out.Findings = append(c.out.Findings, Finding{Code: CodeClusterScenario, Status: ir.StatusBlocked,
		Subject: c.sc + ": " + subject, Message: fmt.Sprintf(format, args...), Fix: fix})
}

// harnessBroke turns an infrastructure failure into NOT RUN.
func (c *cluster) harnessBroke(err error) Outcome {
	if len(c.out.Findings) > 0 {
		return c.out
	}
	return Outcome{NotRun: "the scenario could not complete: " + err.Error()}
}

func submit(ctx context.Context, n *node, id, typ, payload string, timeout time.Duration) (*writv1.SubmitResponse, *writv1.OutcomeDetail, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout+10*time.Second)
	defer cancel()
	r, err := n.Client().Submit(ctx, &writv1.SubmitRequest{Entry: &writv1.Entry{Type: typ, Id: id, Payload: []byte(payload)}, TimeoutMs: uint32(timeout.Milliseconds())})
	if od, ok := writv1.OutcomeFromError(err); ok {
		return nil, od, err
	}
	return r, nil, err
}

func report(ctx context.Context, n *node, typ, payload string) (*writv1.ReportResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return n.Client().Report(ctx, &writv1.ReportRequest{Entry: &writv1.Entry{Type: typ, Payload: []byte(payload)}})
}

func outboxDepth(ctx context.Context, n *node) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ob, err := n.Client().Outbox(ctx, &writv1.OutboxRequest{})
	if err != nil {
		return 0, err
	}
	return ob.Depth, nil
}

// watchAll reads every event from index 1 for the given types until the
// stream idles.
func watchAll(ctx context.Context, n *node, from uint64, types ...string) ([]*writv1.WatchEvent, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	ws, err := n.Client().Watch(ctx, &writv1.WatchRequest{FromIndex: from, Types: types})
	if err != nil {
		return nil, err
	}
	var out []*writv1.WatchEvent
	for {
		ev, err := ws.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) || status.Code(err) == 4 /* DeadlineExceeded */ || ctx.Err() != nil {
				return out, nil
			}
			return out, err
		}
		out = append(out, ev)
	}
}
