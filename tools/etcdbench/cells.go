package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// cell is one row group of the side-by-side table: the same load on both
// systems.
type cell struct {
	name    string
	clients int
	ops     int  // operations at -scale 1
	write   bool // a write (else a linearizable read)
	fact    bool // writ reports job.state_report facts (etcd: put)
	via     bool // sent to a follower instead of the leader
}

// cells are the table rows, in the order they run in a round.
var cells = []cell{
	{name: "write, 1 client", clients: 1, ops: 2000, write: true},
	{name: "write, 100 clients", clients: 100, ops: 20000, write: true},
	{name: "facts, 100 clients", clients: 100, ops: 10000, write: true, fact: true},
	{name: "write, 1000 clients", clients: 1000, ops: 20000, write: true},
	{name: "write via a follower, 100 clients", clients: 100, ops: 20000, write: true, via: true},
	{name: "linearizable read, 1 client", clients: 1, ops: 5000},
	{name: "linearizable read, 100 clients", clients: 100, ops: 40000},
}

// result is one cell's measurement on one system in one round.
type result struct {
	OpsPerSec float64 `json:"ops_per_sec"`
	P50       float64 `json:"p50_ms"`
	P99       float64 `json:"p99_ms"`
	CPUPerOp  float64 `json:"cpu_us_per_op"` // server CPU (all 3 nodes) per operation
	Ops       int     `json:"ops"`
	GapMs     float64 `json:"gap_ms,omitempty"` // failover: longest time without a commit
}

// valueSize is the payload of every write: etcd's value, writ's padding.
const valueSize = 256

// clkTck is the kernel's USER_HZ: /proc/PID/stat counts CPU in these.
const clkTck = 100

// runCell measures c on cl; readKey is a key the round's writes created
// (writ: a job record; etcd: any key, range of a missing key costs the same
// read index).
func runCell(cfg config, cl *cluster, c cell, round int) (result, error) {
	ops := max(1, int(float64(c.ops)*cfg.scale))
	lead, err := cl.leader()
	if err != nil {
		return result{}, err
	}
	target := lead
	if c.via {
		target = cl.follower(lead)
	}
	cpu0 := cl.cpuTicks()
	var r result
	if cl.system == "etcd" {
		r, err = etcdCell(cfg, cl, c, target, ops)
	} else {
		r, err = writCell(cfg, cl, c, target, ops, round)
	}
	if err != nil {
		return r, err
	}
	r.Ops = ops
	r.CPUPerOp = float64(cl.cpuTicks()-cpu0) * (1e6 / clkTck) / float64(ops)
	return r, nil
}

var (
	reqPerSec = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	pctLine   = regexp.MustCompile(`(?m)^\s*([0-9.]+)% in ([0-9.]+) secs`)
)

// etcdCell runs etcd's own benchmark tool: put of 256-byte values, or a
// linearizable range, over one gRPC connection like writctl bench.
func etcdCell(cfg config, cl *cluster, c cell, target *node, ops int) (result, error) {
	args := []string{"--endpoints", target.client, "--conns", "1", "--clients", strconv.Itoa(c.clients)}
	if !c.via {
		args = append(args, "--target-leader")
	}
	if c.write {
		args = append(args, "put", "--key-size", "16", "--val-size", strconv.Itoa(valueSize), "--total", strconv.Itoa(ops),
			"--key-space-size", strconv.Itoa(ops), "--sequential-keys")
	} else {
		if err := etcdPut(target, "bench-key", strings.Repeat("v", valueSize)); err != nil {
			return result{}, err
		}
		args = append(args, "range", "bench-key", "--consistency", "l", "--total", strconv.Itoa(ops))
	}
	out, err := exec.Command(filepath.Join(cfg.etcdBin, "benchmark"), args...).CombinedOutput()
	if err != nil {
		return result{}, fmt.Errorf("etcdbench: etcd benchmark %v: %w\n%s", args, err, tail(out))
	}
	var r result
	m := reqPerSec.FindSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("etcdbench: etcd benchmark printed no Requests/sec:\n%s", tail(out))
	}
	r.OpsPerSec, _ = strconv.ParseFloat(string(m[1]), 64)
	for _, p := range pctLine.FindAllSubmatch(out, -1) {
		secs, _ := strconv.ParseFloat(string(p[2]), 64)
		switch string(p[1]) {
		case "50":
			r.P50 = secs * 1000
		case "99":
			r.P99 = secs * 1000
		}
	}
	return r, nil
}

// writBench is the part of `writctl bench -o json` read here.
type writBench struct {
	OpsPerSec float64        `json:"ops_per_sec"`
	P50       float64        `json:"p50_ms"`
	P99       float64        `json:"p99_ms"`
	MaxGap    float64        `json:"max_gap_ms"`
	Ops       int            `json:"ops"`
	Outcomes  map[string]int `json:"outcomes"`
}

func writCell(cfg config, cl *cluster, c cell, target *node, ops, round int) (result, error) {
	args := []string{"--addr", target.client, "bench", "-o", "json", "--clients", strconv.Itoa(c.clients), "--ops", strconv.Itoa(ops)}
	switch {
	case !c.write:
		// a job the round's first cell committed (run r<round>w1, job 0)
		args = append(args, "--get", fmt.Sprintf("_m/job/r%dw1-0", round))
	case c.fact:
		args = append(args, "--type", "job.state_report", "--size", strconv.Itoa(valueSize), "--run", fmt.Sprintf("r%df", round))
	default:
		args = append(args, "--type", "job.submit", "--size", strconv.Itoa(valueSize), "--run", fmt.Sprintf("r%dw%d", round, c.clients)+viaTag(c))
	}
	out, err := cl.writctl(args...)
	var b writBench
	if jerr := json.Unmarshal(out, &b); jerr != nil {
		return result{}, fmt.Errorf("etcdbench: writctl %v: %w %w\n%s", args, err, jerr, tail(out))
	}
	if err != nil {
		return result{}, fmt.Errorf("etcdbench: writctl %v: not every operation succeeded: %v", args, b.Outcomes)
	}
	return result{OpsPerSec: b.OpsPerSec, P50: b.P50, P99: b.P99}, nil
}

func viaTag(c cell) string {
	if c.via {
		return "f"
	}
	return ""
}

// failover: 10 clients write through a follower for cfg.failoverFor; after
// a third of it the leader is SIGKILLed. The result is the longest time in
// which no write committed.
func failover(cfg config, cl *cluster, round int) (result, error) {
	lead, err := cl.leader()
	if err != nil {
		return result{}, err
	}
	via := cl.follower(lead)
	killAt := cfg.failoverFor / 3
	time.AfterFunc(killAt, lead.kill)
	if cl.system == "writ" {
		args := []string{"--addr", via.client, "bench", "-o", "json", "--clients", "10", "--ops", "100000000",
			"--duration", cfg.failoverFor.String(), "--type", "job.submit", "--size", strconv.Itoa(valueSize), "--run", fmt.Sprintf("r%dk", round)}
		out, _ := cl.writctl(args...) // some writes fail while there is no leader: exit 1
		var b writBench
		if err := json.Unmarshal(out, &b); err != nil {
			return result{}, fmt.Errorf("etcdbench: writctl %v: %w\n%s", args, err, tail(out))
		}
		return result{GapMs: b.MaxGap, Ops: b.Ops, OpsPerSec: b.OpsPerSec}, nil
	}
	return etcdFailover(via, cfg.failoverFor)
}

// etcdFailover is the same load as writ's failover cell over etcd's Go
// client (etcd's benchmark tool reports no gaps): 10 goroutines putting
// 256-byte values through one connection to a follower.
func etcdFailover(via *node, d time.Duration) (result, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{via.client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return result{}, fmt.Errorf("etcdbench: %w", err)
	}
	defer func() { _ = cli.Close() }()
	val := strings.Repeat("v", valueSize)
	start := time.Now()
	var mu sync.Mutex
	var ends []time.Time
	var wg sync.WaitGroup
	var firstErr error
	for w := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Since(start) < d; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err := cli.Put(ctx, fmt.Sprintf("fo-%d-%d", w, i), val)
				cancel()
				now := time.Now()
				mu.Lock()
				if err == nil {
					ends = append(ends, now)
				} else if firstErr == nil && !errors.Is(err, context.DeadlineExceeded) {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	end := time.Now()
	slices.SortFunc(ends, time.Time.Compare)
	prev, gap := start, time.Duration(0)
	for _, t := range append(ends, end) {
		gap = max(gap, t.Sub(prev))
		prev = t
	}
	_ = firstErr // errors while there is no leader are the point of the cell
	return result{GapMs: float64(gap) / 1e6, Ops: len(ends), OpsPerSec: float64(len(ends)) / end.Sub(start).Seconds()}, nil
}

// etcdPut writes the key the read cells read.
func etcdPut(n *node, k, v string) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{n.client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("etcdbench: %w", err)
	}
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, k, v); err != nil {
		return fmt.Errorf("etcdbench: put %s: %w", k, err)
	}
	return nil
}

func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 2000 {
		s = "…" + s[len(s)-2000:]
	}
	return s
}
