package proccluster

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/node/config"
)

// Cluster is a set of nodes the caller started, polled over their API
// clients. Nodes[0] is the node asked for membership (the bootstrap node).
type Cluster struct {
	Nodes []*Node
	// StatusTimeout bounds one Status or Members call (default 2 s);
	// PollEvery is the pause between polls (default 100 ms).
	StatusTimeout, PollEvery time.Duration
	// WhileDown, if set, is called when WaitReady finds the node's process
	// gone: it may restart the node (as a supervisor would) and return
	// nil to keep waiting. Unset, WaitReady fails at once.
	WhileDown func(n *Node) error
}

func (c *Cluster) statusTimeout() time.Duration {
	if c.StatusTimeout > 0 {
		return c.StatusTimeout
	}
	return 2 * time.Second
}

// Poll calls cond every PollEvery until it holds, d passes or ctx ends; the
// error carries cond's last description.
func (c *Cluster) Poll(ctx context.Context, d time.Duration, cond func() (bool, string, error)) error {
	every := c.PollEvery
	if every <= 0 {
		every = 100 * time.Millisecond
	}
	deadline := time.Now().Add(d)
	for {
		ok, why, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("not within %s: %s", d.Round(time.Millisecond), why)
		}
		select {
		case <-ctx.Done():
		case <-time.After(every):
		}
	}
}

// Status reads n's status.
func (c *Cluster) Status(ctx context.Context, n *Node) (*writv1.StatusResponse, error) {
	cl := n.Client()
	if cl == nil {
		return nil, fmt.Errorf("proccluster: %s has no client", n.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, c.statusTimeout())
	defer cancel()
	return cl.Status(ctx, &writv1.StatusRequest{})
}

// WaitReady waits up to d until n says it is ready. A node whose process is
// gone fails it at once (it exited while starting), unless WhileDown is set.
func (c *Cluster) WaitReady(ctx context.Context, n *Node, d time.Duration) error {
	err := c.Poll(ctx, d, func() (bool, string, error) {
		if !n.Running() {
			if c.WhileDown == nil {
				return false, "", fmt.Errorf("proccluster: %s exited while waiting for readiness (exit code %d)", n.Name, n.ExitCode())
			}
			if err := c.WhileDown(n); err != nil {
				return false, "", err
			}
		}
		st, err := c.Status(ctx, n)
		switch {
		case err != nil:
			return false, err.Error(), nil
		case !st.Ready:
			return false, st.NotReadyReason, nil
		}
		return true, "", nil
	})
	if err != nil {
		return fmt.Errorf("proccluster: %s not ready: %w", n.Name, err)
	}
	return nil
}

// WaitVoters waits up to d until Nodes[0] lists want voters.
func (c *Cluster) WaitVoters(ctx context.Context, want int, d time.Duration) error {
	err := c.Poll(ctx, d, func() (bool, string, error) {
		cl := c.Nodes[0].Client()
		if cl == nil {
			return false, c.Nodes[0].Name + " has no client", nil
		}
		cctx, cancel := context.WithTimeout(ctx, c.statusTimeout())
		defer cancel()
		m, err := cl.Members(cctx, &writv1.MembersRequest{})
		if err != nil {
			return false, err.Error(), nil
		}
		v := 0
		for _, x := range m.Members {
			if x.Role == "voter" {
				v++
			}
		}
		return v == want, fmt.Sprintf("%d of %d voters", v, want), nil
	})
	if err != nil {
		return fmt.Errorf("proccluster: the cluster did not reach %d voters: %w", want, err)
	}
	return nil
}

// Leader waits up to d for a running, unpaused node that says it is the
// ready leader.
func (c *Cluster) Leader(ctx context.Context, d time.Duration) (*Node, error) {
	var leader *Node
	err := c.Poll(ctx, d, func() (bool, string, error) {
		for _, n := range c.Nodes {
			if !n.Up() {
				continue
			}
			if st, err := c.Status(ctx, n); err == nil && st.IsLeader && st.Ready {
				leader = n
				return true, "", nil
			}
		}
		return false, "no node is the ready leader", nil
	})
	if err != nil {
		return nil, fmt.Errorf("proccluster: no ready leader: %w", err)
	}
	return leader, nil
}

// Converge waits up to d until every node reports the same applied index and
// state hash (and, with emptyOutbox, no node's outbox holds a fact); it
// returns that "index/hash".
func (c *Cluster) Converge(ctx context.Context, d time.Duration, emptyOutbox bool) (string, error) {
	var key string
	err := c.Poll(ctx, d, func() (bool, string, error) {
		seen := map[string]bool{}
		var desc []string
		for _, n := range c.Nodes {
			st, err := c.Status(ctx, n)
			if err != nil {
				return false, strings.Join(append(desc, n.Name+": "+err.Error()), " "), nil
			}
			key = fmt.Sprintf("%d/%s", st.StateIndex, st.StateHash)
			desc = append(desc, fmt.Sprintf("%s=%s outbox=%d", n.Name, key, st.OutboxDepth))
			if emptyOutbox && st.OutboxDepth > 0 {
				return false, strings.Join(desc, " "), nil
			}
			seen[key] = true
		}
		return len(seen) == 1, strings.Join(desc, " "), nil
	})
	if err != nil {
		return "", fmt.Errorf("proccluster: replicas did not converge: %w", err)
	}
	return key, nil
}

// Bootstrap starts Nodes[0] and waits up to first until it is ready, starts
// the others (start joins them), then waits up to rest for every node to be
// ready and a voter.
func (c *Cluster) Bootstrap(ctx context.Context, start func(*Node) error, first, rest time.Duration) error {
	for i, n := range c.Nodes {
		if err := start(n); err != nil {
			return err
		}
		if i == 0 {
			if err := c.WaitReady(ctx, n, first); err != nil {
				return err
			}
		}
	}
	for _, n := range c.Nodes {
		if err := c.WaitReady(ctx, n, rest); err != nil {
			return err
		}
	}
	return c.WaitVoters(ctx, len(c.Nodes), rest)
}

// JoinFlags make a node join through seed (a gossip address); test nodes run
// without peer TLS, API TLS or a gossip key (docs/security.md), hence
// --insecure, unless the caller's own flags set it.
func JoinFlags(seed string, own ...[]string) []string {
	args := []string{"--join", seed}
	for _, o := range own {
		for _, a := range o {
			if a == "--insecure" || strings.HasPrefix(a, "--insecure=") {
				return args
			}
		}
	}
	return append(args, "--insecure")
}

// PluginFlags are one --plugin PATH=SHA256 per plugin, pinned to the binary
// as it is now: a configured writd runs only plugins pinned by sha256
// (docs/security.md).
func PluginFlags(paths ...string) ([]string, error) {
	var args []string
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("proccluster: plugin %s: %w", p, err)
		}
		pin, err := config.PinPlugin(abs)
		if err != nil {
			return nil, fmt.Errorf("proccluster: %w", err)
		}
		args = append(args, "--plugin", pin.String())
	}
	return args, nil
}

// FreeAddr is host with a port the kernel has just handed out.
func FreeAddr(host string) (string, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", fmt.Errorf("proccluster: no free port on %s: %w", host, err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}
