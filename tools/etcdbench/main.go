// Command etcdbench measures writ side by side with etcd on this machine:
// fresh 3-node clusters of both (fsync on, leader-targeted, 256-byte
// values), the same cells run in interleaved rounds (etcd first in odd
// rounds, writ first in even ones), the load average recorded before every
// round, server CPU per operation read from /proc/PID/stat of the three
// servers (and writd's plugin processes), and a Markdown table plus an SVG
// plot of the writ/etcd ratios written to -out. etcd's server and its
// benchmark tool are built from this module, which pins them
// (scripts/bench-vs-etcd.sh; docs/performance.md).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

type config struct {
	writBin, etcdBin, out, work string
	writHosts, etcdHosts        []string
	rounds                      int
	scale                       float64
	failoverFor                 time.Duration
	only                        string
	writdArgs                   []string // extra writd flags (A/B runs)
}

// round is everything measured in one round.
type round struct {
	N       int                          `json:"round"`
	Load    map[string]string            `json:"loadavg"` // system → /proc/loadavg before its cluster started
	Results map[string]map[string]result `json:"results"` // system → cell → result
}

func main() {
	var cfg config
	var writHosts, etcdHosts string
	flag.StringVar(&cfg.writBin, "writ-bin", "bin", "directory holding writd, writctl and writ-jobs")
	flag.StringVar(&cfg.etcdBin, "etcd-bin", "bin/etcdbench", "directory holding etcd and benchmark")
	flag.StringVar(&cfg.out, "out", "bench-vs-etcd", "output directory: results.json, table.md, plot.svg")
	flag.StringVar(&cfg.work, "work", "", "directory for the clusters' data and logs (default: a temporary one, removed unless a round fails)")
	flag.StringVar(&writHosts, "writ-hosts", "127.0.61.1,127.0.61.2,127.0.61.3", "three loopback addresses for writ's nodes")
	flag.StringVar(&etcdHosts, "etcd-hosts", "127.0.62.1,127.0.62.2,127.0.62.3", "three loopback addresses for etcd's members")
	flag.IntVar(&cfg.rounds, "rounds", 3, "interleaved rounds (each on fresh clusters)")
	flag.Float64Var(&cfg.scale, "scale", 1, "multiplier of every cell's operation count")
	flag.DurationVar(&cfg.failoverFor, "failover", 9*time.Second, "length of the failover cell (the leader is killed after a third of it; 0: skip the cell)")
	flag.StringVar(&cfg.only, "cells", "", "comma-separated substrings: run only the cells whose name contains one")
	var writdArgs string
	flag.StringVar(&writdArgs, "writd-args", "", "extra writd flags, space-separated (e.g. \"--api-forward-stream=false\" for an A/B run)")
	flag.Parse()
	cfg.writHosts, cfg.etcdHosts = strings.Split(writHosts, ","), strings.Split(etcdHosts, ",")
	cfg.writdArgs = strings.Fields(writdArgs)
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(cfg config) error {
	switch {
	case len(cfg.writHosts) != 3 || len(cfg.etcdHosts) != 3:
		return fmt.Errorf("etcdbench: -writ-hosts and -etcd-hosts: give exactly three addresses each")
	case cfg.rounds < 1:
		return fmt.Errorf("etcdbench: -rounds %d: run at least one round", cfg.rounds)
	case cfg.scale <= 0:
		return fmt.Errorf("etcdbench: -scale %v: use a positive multiplier", cfg.scale)
	}
	for _, b := range []string{filepath.Join(cfg.writBin, "writd"), filepath.Join(cfg.writBin, "writctl"), filepath.Join(cfg.writBin, "writ-jobs"),
		filepath.Join(cfg.etcdBin, "etcd"), filepath.Join(cfg.etcdBin, "benchmark")} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("etcdbench: %w: build it first (make bench-vs-etcd does)", err)
		}
	}
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return fmt.Errorf("etcdbench: %w", err)
	}
	work, keep := cfg.work, cfg.work != ""
	if work == "" {
		var err error
		if work, err = os.MkdirTemp("", "etcdbench-"); err != nil {
			return fmt.Errorf("etcdbench: %w", err)
		}
	}
	var rounds []round
	var failed error
	for r := 1; r <= cfg.rounds && failed == nil; r++ {
		rd := round{N: r, Load: map[string]string{}, Results: map[string]map[string]result{}}
		order := []string{"etcd", "writ"}
		if r%2 == 0 {
			order = []string{"writ", "etcd"}
		}
		for _, sys := range order {
			res, load, err := runSystem(cfg, sys, filepath.Join(work, fmt.Sprintf("r%d-%s", r, sys)), r)
			rd.Load[sys] = load
			rd.Results[sys] = res
			if err != nil {
				failed = fmt.Errorf("round %d, %s: %w", r, sys, err)
				keep = true
				break
			}
		}
		rounds = append(rounds, rd)
		if err := writeOutputs(cfg, rounds); err != nil {
			return err
		}
	}
	if !keep {
		_ = os.RemoveAll(work)
	} else {
		fmt.Fprintf(os.Stderr, "etcdbench: cluster data and logs kept in %s\n", work)
	}
	if failed != nil {
		return failed
	}
	fmt.Printf("wrote %s\n", strings.Join([]string{filepath.Join(cfg.out, "table.md"), filepath.Join(cfg.out, "plot.svg"), filepath.Join(cfg.out, "results.json")}, ", "))
	return nil
}

func selected(cfg config, name string) bool {
	if cfg.only == "" {
		return true
	}
	for _, s := range strings.Split(cfg.only, ",") {
		if s != "" && strings.Contains(name, s) {
			return true
		}
	}
	return false
}

// runSystem starts a fresh cluster of sys and runs every cell on it.
func runSystem(cfg config, sys, dir string, r int) (map[string]result, string, error) {
	res := map[string]result{}
	load := loadavg()
	fmt.Fprintf(os.Stderr, "round %d %s: loadavg %s\n", r, sys, load)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return res, load, fmt.Errorf("etcdbench: %w", err)
	}
	start := startEtcd
	if sys == "writ" {
		start = startWrit
	}
	cl, err := start(cfg, dir)
	if err != nil {
		return res, load, err
	}
	defer cl.stop()
	for _, c := range cells {
		if !selected(cfg, c.name) && !(c.name == cells[0].name && sys == "writ") {
			continue // writ's read cells read a job of the first cell: it always runs
		}
		if c.fact && sys == "etcd" {
			continue // etcd has no facts: its row compares with the same put load
		}
		x, err := runCell(cfg, cl, c, r)
		if err != nil {
			return res, load, fmt.Errorf("%s: %w", c.name, err)
		}
		res[c.name] = x
		fmt.Fprintf(os.Stderr, "  %-36s %9.0f ops/s  p50 %6.2f ms  p99 %7.2f ms  cpu %6.0f µs/op\n", c.name, x.OpsPerSec, x.P50, x.P99, x.CPUPerOp)
	}
	if cfg.failoverFor > 0 && selected(cfg, failoverCell) {
		x, err := failover(cfg, cl, r)
		if err != nil {
			return res, load, fmt.Errorf("failover: %w", err)
		}
		res[failoverCell] = x
		fmt.Fprintf(os.Stderr, "  %-36s longest gap %.0f ms (%d writes)\n", failoverCell, x.GapMs, x.Ops)
	}
	return res, load, nil
}

const failoverCell = "SIGKILL leader, 10 clients"

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func writeOutputs(cfg config, rounds []round) error {
	js, err := json.MarshalIndent(rounds, "", "  ")
	if err != nil {
		return fmt.Errorf("etcdbench: %w", err)
	}
	rows := tableRows(rounds)
	for name, data := range map[string][]byte{
		"results.json": append(js, '\n'),
		"table.md":     []byte(markdown(rounds, rows)),
		"plot.svg":     []byte(plot(rows)),
	} {
		if err := os.WriteFile(filepath.Join(cfg.out, name), data, 0o644); err != nil {
			return fmt.Errorf("etcdbench: %w", err)
		}
	}
	return nil
}
