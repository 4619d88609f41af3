package robustness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Usage is one node process's resident memory and goroutine count at one
// moment (-1: could not be read).
type Usage struct {
	Pid        int   `json:"pid"`
	RSS        int64 `json:"rss_bytes"`
	Goroutines int   `json:"goroutines"`
}

// NodeUsage is what the sampler saw of one node over a run: its most, and
// its usage when the cluster had just started and again once it had
// converged after heal (both quiet: no client traffic), when the same
// process was running at both (Growth then compares them).
type NodeUsage struct {
	Node          string `json:"node"`
	MaxRSS        int64  `json:"max_rss_bytes"`
	MaxGoroutines int    `json:"max_goroutines"`
	Start         *Usage `json:"start,omitempty"`
	End           *Usage `json:"end,omitempty"`
	// Growth says how the process that ran from start to end grew, when
	// it grew past the flag's bound (goroutines more than doubled and by
	// more than 50, or RSS more than doubled and by more than 64 MiB).
	Growth string `json:"growth,omitempty"`
}

// sampler samples every running node's RSS (from /proc) and goroutine
// count (writd's pprof goroutine profile on its metrics listener).
type sampler struct {
	cl    *Cluster
	mu    sync.Mutex
	usage map[string]*NodeUsage
}

func newSampler(cl *Cluster) *sampler {
	s := &sampler{cl: cl, usage: map[string]*NodeUsage{}}
	for _, n := range cl.nodes {
		s.usage[n.Name] = &NodeUsage{Node: n.Name}
	}
	return s
}

// run samples every node each period until ctx ends.
func (s *sampler) run(ctx context.Context, every time.Duration) {
	for ctx.Err() == nil {
		s.sample(ctx)
		sleepCtx(ctx, every)
	}
}

// sample reads every running node once, folds the reading into its most,
// and returns the readings.
func (s *sampler) sample(ctx context.Context) map[string]Usage {
	out := map[string]Usage{}
	for _, n := range s.cl.nodes {
		pid := n.Pid()
		if pid == 0 || !n.Up() {
			continue
		}
		u := Usage{Pid: pid, RSS: rssOf(pid), Goroutines: goroutinesOf(ctx, n.metrics)}
		out[n.Name] = u
		s.mu.Lock()
		nu := s.usage[n.Name]
		nu.MaxRSS = max(nu.MaxRSS, u.RSS)
		nu.MaxGoroutines = max(nu.MaxGoroutines, u.Goroutines)
		s.mu.Unlock()
	}
	return out
}

// mark records a quiet reading of every node as its start (or end). At
// the end, a node whose growth is flagged has its goroutine profile
// (grouped stacks) saved as goroutines-<node>.txt in dir, so that a flag
// says where the goroutines are, not only how many.
func (s *sampler) mark(ctx context.Context, end bool, dir string) {
	for name, u := range s.sample(ctx) {
		s.mu.Lock()
		nu := s.usage[name]
		if !end {
			nu.Start = &u
			s.mu.Unlock()
			continue
		}
		nu.End = &u
		flagged := growth(nu.Start, nu.End) != ""
		s.mu.Unlock()
		if flagged && dir != "" {
			for _, n := range s.cl.nodes {
				if n.Name == name {
					saveGoroutines(ctx, n.metrics, 1, filepath.Join(dir, "goroutines-"+name+".txt"))
				}
			}
		}
	}
}

// saveGoroutines writes a writd's goroutine profile to path: debug=1,
// stacks grouped with their counts; debug=2, every goroutine with how long
// it has been blocked. A profile it cannot read is left out.
func saveGoroutines(ctx context.Context, addr string, debug int, path string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/goroutine?debug=%d", addr, debug), nil)
	if err != nil {
		return
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		return
	}
	_ = os.WriteFile(path, b, 0o644)
}

// result is every node's usage, with growth flagged.
func (s *sampler) result() []NodeUsage {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []NodeUsage
	for _, n := range s.cl.nodes {
		nu := *s.usage[n.Name]
		nu.Growth = growth(nu.Start, nu.End)
		out = append(out, nu)
	}
	return out
}

// growth describes how a process grew from a to b when past the flag's
// bound ("" when it did not, or a and b are not the same process).
func growth(a, b *Usage) string {
	if a == nil || b == nil || a.Pid != b.Pid || a.Goroutines < 0 || b.Goroutines < 0 {
		return ""
	}
	var g []string
	if b.Goroutines > 2*a.Goroutines && b.Goroutines-a.Goroutines > 50 {
		g = append(g, fmt.Sprintf("goroutines %d → %d", a.Goroutines, b.Goroutines))
	}
	if a.RSS > 0 && b.RSS > 2*a.RSS && b.RSS-a.RSS > 64<<20 {
		g = append(g, fmt.Sprintf("RSS %d → %d MiB", a.RSS>>20, b.RSS>>20))
	}
	return strings.Join(g, ", ")
}

// rssOf is pid's resident set in bytes (VmRSS), -1 if unreadable.
func rssOf(pid int) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return -1
			}
			return kb << 10
		}
	}
	return -1
}

// goroutinesOf reads the goroutine count from a writd's pprof goroutine
// profile ("goroutine profile: total N"), -1 if it cannot.
func goroutinesOf(ctx context.Context, addr string) int {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/goroutine?debug=1", nil)
	if err != nil {
		return -1
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(io.LimitReader(resp.Body, 256)).ReadString('\n')
	if err != nil && line == "" {
		return -1
	}
	v, ok := strings.CutPrefix(strings.TrimSpace(line), "goroutine profile: total ")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return -1
	}
	return n
}
