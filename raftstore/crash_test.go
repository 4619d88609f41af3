package raftstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/writ-dev/writ/kv"
)

// The crash-recovery test re-executes this test binary as real node
// processes (TestMain dispatches on WRITTEST_RAFTSTORE_CHILD), SIGKILLs them
// mid-load and checks what survived.
func TestMain(m *testing.M) {
	if os.Getenv("WRITTEST_RAFTSTORE_CHILD") == "1" {
		os.Exit(runChild())
	}
	os.Exit(m.Run())
}

// runChild runs one node and a load generator that appends every
// acknowledged (committed and applied) key to the acked file.
func runChild() int {
	var peers []Peer
	for _, p := range strings.Split(os.Getenv("WRITTEST_RS_PEERS"), ",") {
		id, addr, _ := strings.Cut(p, "=")
		peers = append(peers, Peer{ID: id, Addr: addr})
	}
	id := os.Getenv("WRITTEST_RS_ID")
	var addr string
	for _, p := range peers {
		if p.ID == id {
			addr = p.Addr
		}
	}
	var n *Node
	var err error
	for range 50 { // the previous incarnation's socket may linger briefly
		n, err = Start(Config{NodeID: id, DataDir: os.Getenv("WRITTEST_RS_DIR"), RaftAddr: addr, Peers: peers, Logger: testLogger(nil)})
		if err == nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child start:", err)
		return 2
	}
	acked, err := os.OpenFile(os.Getenv("WRITTEST_RS_ACKED"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child acked file:", err)
		return 2
	}
	boot := rand.Uint32()
	for w := range 4 {
		go func() {
			for i := 0; ; i++ {
				key := fmt.Sprintf("k/%s/%08x/%d/%d", id, boot, w, i)
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				p, err := n.Propose(ctx, []kv.Command{put(key, key, strings.Repeat("v", 64))})
				if err == nil {
					var res []kv.Result
					res, err = p.Wait(ctx)
					if err == nil && res[0].Status == kv.StatusApplied {
						if _, err := acked.WriteString(key + "\n"); err != nil {
							fmt.Fprintln(os.Stderr, "child ack write:", err)
							os.Exit(2)
						}
					}
				}
				cancel()
				if err != nil {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	n.Stop()
	return 0
}

type child struct {
	cmd *exec.Cmd
}

func startChild(t *testing.T, id, dir, peers, acked, logPath string) *child {
	t.Helper()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "WRITTEST_RAFTSTORE_CHILD=1", "WRITTEST_RS_ID="+id, "WRITTEST_RS_DIR="+dir, "WRITTEST_RS_PEERS="+peers, "WRITTEST_RS_ACKED="+acked)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd}
	t.Cleanup(func() { c.kill() })
	return c
}

func (c *child) kill() {
	if c.cmd.ProcessState == nil {
		_ = c.cmd.Process.Signal(syscall.SIGKILL)
		_ = c.cmd.Wait()
	}
}

// ackedKeys reads complete lines (a line cut by SIGKILL is not an ack).
func ackedKeys(t *testing.T, paths ...string) []string {
	t.Helper()
	var keys []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if i := strings.LastIndexByte(s, '\n'); i >= 0 {
			s = s[:i]
		} else {
			s = ""
		}
		sc := bufio.NewScanner(strings.NewReader(s))
		for sc.Scan() {
			if sc.Text() != "" {
				keys = append(keys, sc.Text())
			}
		}
	}
	return keys
}

func TestCrashRecoveryWithSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test")
	}
	root := t.TempDir()
	var addrs []string
	for i := range 3 {
		lis, err := net.Listen("tcp", loopback(21+i)+":0")
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, lis.Addr().String())
		lis.Close()
	}
	var pl []string
	for i, a := range addrs {
		pl = append(pl, fmt.Sprintf("n%d=%s", i+1, a))
	}
	peers := strings.Join(pl, ",")
	dir := func(i int) string { return filepath.Join(root, fmt.Sprintf("n%d", i+1)) }
	ackf := func(i int) string { return filepath.Join(root, fmt.Sprintf("acked-n%d", i+1)) }
	logf := func(i int) string { return filepath.Join(root, fmt.Sprintf("n%d.log", i+1)) }
	all := []string{ackf(0), ackf(1), ackf(2)}
	children := make([]*child, 3)
	for i := range 3 {
		children[i] = startChild(t, fmt.Sprintf("n%d", i+1), dir(i), peers, ackf(i), logf(i))
	}
	dump := func() {
		for i := range 3 {
			b, _ := os.ReadFile(logf(i))
			t.Logf("n%d log:\n%s", i+1, b)
		}
	}
	waitAcks := func(paths []string, n int) {
		deadline := time.Now().Add(30 * time.Second)
		for len(ackedKeys(t, paths...)) < n {
			if time.Now().After(deadline) {
				dump()
				t.Fatalf("load made no progress: %d acked", len(ackedKeys(t, paths...)))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitAcks(all, 100)
	// SIGKILL one node mid-load, restart it, let the load continue.
	children[0].kill()
	before := len(ackedKeys(t, ackf(0)))
	time.Sleep(300 * time.Millisecond)
	children[0] = startChild(t, "n1", dir(0), peers, ackf(0), logf(0))
	waitAcks([]string{ackf(0)}, before+30)
	// Now SIGKILL every node at once, mid-load.
	for _, c := range children {
		c.kill()
	}
	acked := ackedKeys(t, all...)
	t.Logf("%d acknowledged entries before the final SIGKILL", len(acked))

	// Recover all three in process from their data directories.
	c := &cluster{t: t, nodes: make([]*Node, 3)}
	for i := range 3 {
		c.cfgs = append(c.cfgs, Config{NodeID: fmt.Sprintf("n%d", i+1), DataDir: dir(i), RaftAddr: addrs[i], Logger: testLogger(t)})
	}
	for i := range 3 {
		c.start(i)
	}
	t.Cleanup(c.stopAll)
	li := c.leader(10 * time.Second)
	mustPropose(t, c.nodes[li], put("barrier", "barrier", "x"))
	c.converge(20 * time.Second)
	for _, n := range c.nodes {
		recs, err := n.List(context.Background(), "k/", false)
		if err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		for _, r := range recs {
			have[r.Key] = true
		}
		for _, k := range acked {
			if !have[k] {
				t.Fatalf("%s lost acknowledged entry %s", n.ID(), k)
			}
		}
	}
}
