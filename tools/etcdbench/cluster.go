package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// node is one server process of a cluster under test.
type node struct {
	name, host string
	client     string // client API address host:port
	cmd        *exec.Cmd
	exited     chan struct{}
}

// cluster is a fresh 3-node cluster of one system.
type cluster struct {
	system string // "etcd" or "writ"
	nodes  []*node
	dir    string
	bin    string // the directory of writctl (writ only)
}

// cleanEnv is the environment without WRIT_* variables: writd refuses
// variables it does not know.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WRIT_") && !strings.HasPrefix(kv, "WRITCTL_") && !strings.HasPrefix(kv, "ETCD") {
			env = append(env, kv)
		}
	}
	return env
}

func (c *cluster) spawn(n *node, logName, bin string, args ...string) error {
	logf, err := os.Create(filepath.Join(c.dir, logName))
	if err != nil {
		return fmt.Errorf("etcdbench: %w", err)
	}
	n.cmd = exec.Command(bin, args...)
	n.cmd.Env = cleanEnv()
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := n.cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("etcdbench: start %s: %w", bin, err)
	}
	n.exited = make(chan struct{})
	go func() { _ = n.cmd.Wait(); _ = logf.Close(); close(n.exited) }()
	return nil
}

// startEtcd starts 3 etcd members with fsync on (the default), the stock
// 100 ms heartbeat and 1 s election timeout.
func startEtcd(cfg config, dir string) (*cluster, error) {
	c := &cluster{system: "etcd", dir: dir}
	var initial []string
	for i, h := range cfg.etcdHosts {
		initial = append(initial, fmt.Sprintf("e%d=http://%s:2380", i+1, h))
	}
	for i, h := range cfg.etcdHosts {
		n := &node{name: fmt.Sprintf("e%d", i+1), host: h, client: h + ":2379"}
		c.nodes = append(c.nodes, n)
		err := c.spawn(n, n.name+".log", filepath.Join(cfg.etcdBin, "etcd"),
			"--name", n.name, "--data-dir", filepath.Join(dir, n.name),
			"--listen-client-urls", "http://"+n.client, "--advertise-client-urls", "http://"+n.client,
			"--listen-peer-urls", "http://"+h+":2380", "--initial-advertise-peer-urls", "http://"+h+":2380",
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "etcdbench", "--log-level", "error")
		if err != nil {
			c.stop()
			return nil, err
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := c.leader(); err == nil {
			return c, nil
		} else if time.Now().After(deadline) {
			c.stop()
			return nil, fmt.Errorf("etcdbench: etcd cluster has no leader after 60s: %w (logs in %s)", err, dir)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// startWrit starts 3 writd nodes, each with its writ-jobs plugin process;
// n2 and n3 join n1 over gossip and are promoted to voters.
func startWrit(cfg config, dir string) (*cluster, error) {
	c := &cluster{system: "writ", dir: dir, bin: cfg.writBin}
	// --insecure is for the plaintext ports; the plugin is still pinned
	// by its sha256, as writd wants outside dev mode
	jobs := filepath.Join(cfg.writBin, "writ-jobs")
	b, err := os.ReadFile(jobs)
	if err != nil {
		return nil, fmt.Errorf("etcdbench: %w", err)
	}
	sum := sha256.Sum256(b)
	jobs += "=" + hex.EncodeToString(sum[:])
	for i, h := range cfg.writHosts {
		n := &node{name: fmt.Sprintf("n%d", i+1), host: h, client: h + ":7070"}
		c.nodes = append(c.nodes, n)
		args := []string{"--node-id", n.name, "--data-dir", filepath.Join(dir, n.name),
			"--api-addr", n.client, "--raft-addr", h + ":7071", "--gossip-addr", h + ":7072",
			"--plugin", jobs, "--insecure", "--membership-profile", "local", "--log-level", "warn"}
		args = append(args, cfg.writdArgs...)
		if i > 0 {
			args = append(args, "--join", cfg.writHosts[0]+":7072")
		}
		if err := os.MkdirAll(filepath.Join(dir, n.name), 0o700); err != nil {
			return nil, fmt.Errorf("etcdbench: %w", err)
		}
		if err := c.spawn(n, n.name+".log", filepath.Join(cfg.writBin, "writd"), args...); err != nil {
			c.stop()
			return nil, err
		}
		if i == 0 {
			if err := c.waitWrit(n, 60*time.Second, func(s writStatus) bool { return s.Ready }); err != nil {
				c.stop()
				return nil, err
			}
		}
	}
	for _, n := range c.nodes {
		if err := c.waitWrit(n, 90*time.Second, func(s writStatus) bool { return s.Ready && s.LeaderID != "" }); err != nil {
			c.stop()
			return nil, err
		}
	}
	deadline := time.Now().Add(90 * time.Second)
	for c.writVoters() < 3 {
		if time.Now().After(deadline) {
			c.stop()
			return nil, fmt.Errorf("etcdbench: writ cluster did not reach 3 voters in 90s (logs in %s)", dir)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return c, nil
}

type writStatus struct {
	Ready    bool   `json:"ready"`
	NodeID   string `json:"node_id"`
	LeaderID string `json:"leader_id"`
}

func (c *cluster) writctl(args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(c.bin, "writctl"), args...)
	cmd.Env = cleanEnv()
	return cmd.Output()
}

func (c *cluster) writStatusOf(n *node) (writStatus, error) {
	var s writStatus
	out, err := c.writctl("--addr", n.client, "--timeout", "2s", "status", "-o", "json")
	if err != nil {
		return s, fmt.Errorf("etcdbench: writctl status %s: %w", n.client, err)
	}
	if err := json.Unmarshal(out, &s); err != nil {
		return s, fmt.Errorf("etcdbench: writctl status %s: %w", n.client, err)
	}
	return s, nil
}

func (c *cluster) waitWrit(n *node, d time.Duration, ok func(writStatus) bool) error {
	deadline := time.Now().Add(d)
	for {
		select {
		case <-n.exited:
			return fmt.Errorf("etcdbench: %s exited; see %s", n.name, filepath.Join(c.dir, n.name+".log"))
		default:
		}
		if s, err := c.writStatusOf(n); err == nil && ok(s) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcdbench: %s not ready in %v; see %s", n.name, d, filepath.Join(c.dir, n.name+".log"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (c *cluster) writVoters() int {
	out, err := c.writctl("--addr", c.nodes[0].client, "--timeout", "2s", "members", "-o", "json")
	if err != nil {
		return 0
	}
	return strings.Count(string(out), `"role":"voter"`)
}

// leader is the node that leads now.
func (c *cluster) leader() (*node, error) {
	if c.system == "writ" {
		for _, n := range c.nodes {
			if s, err := c.writStatusOf(n); err == nil && s.LeaderID != "" {
				for _, m := range c.nodes {
					if m.name == s.LeaderID {
						return m, nil
					}
				}
			}
		}
		return nil, fmt.Errorf("etcdbench: no writ node knows a leader")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.nodes[0].client}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcdbench: %w", err)
	}
	defer func() { _ = cli.Close() }()
	for _, n := range c.nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := cli.Status(ctx, n.client)
		cancel()
		if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
			return n, nil
		}
	}
	return nil, fmt.Errorf("etcdbench: no etcd member leads")
}

// follower is a live node that does not lead.
func (c *cluster) follower(leader *node) *node {
	for _, n := range c.nodes {
		if n != leader {
			select {
			case <-n.exited:
			default:
				return n
			}
		}
	}
	return nil
}

// cpuTicks is the user+system CPU, in clock ticks, of the cluster's server
// processes and their children (writd's plugin processes).
func (c *cluster) cpuTicks() int64 {
	var pids []int
	for _, n := range c.nodes {
		if n.cmd != nil && n.cmd.Process != nil {
			pids = append(pids, n.cmd.Process.Pid)
		}
	}
	pids = append(pids, childrenOf(pids)...)
	var sum int64
	for _, p := range pids {
		u, s, _, ok := procStat(p)
		if ok {
			sum += u + s
		}
	}
	return sum
}

// procStat reads utime, stime and ppid of pid from /proc/PID/stat.
func procStat(pid int) (utime, stime int64, ppid int, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces
	if i < 0 {
		return 0, 0, 0, false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	utime, _ = strconv.ParseInt(f[11], 10, 64)
	stime, _ = strconv.ParseInt(f[12], 10, 64)
	return utime, stime, ppid, true
}

func childrenOf(parents []int) []int {
	want := map[int]bool{}
	for _, p := range parents {
		want[p] = true
	}
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, _, pp, ok := procStat(pid); ok && want[pp] {
			out = append(out, pid)
		}
	}
	return out
}

// kill sends SIGKILL to n's process group (writd and its plugin).
func (n *node) kill() {
	if n.cmd != nil && n.cmd.Process != nil {
		_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// stop ends every node (SIGTERM, then SIGKILL after 10 s).
func (c *cluster) stop() {
	for _, n := range c.nodes {
		if n.cmd != nil && n.cmd.Process != nil {
			_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGTERM)
		}
	}
	for _, n := range c.nodes {
		if n.exited == nil {
			continue
		}
		select {
		case <-n.exited:
		case <-time.After(10 * time.Second):
			n.kill()
			<-n.exited
		}
	}
}
