package robustness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// children lists the processes whose parent is pid (from /proc).
func children(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		cpid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so parse
		// after its closing parenthesis
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) >= 2 {
			if ppid, err := strconv.Atoi(f[1]); err == nil && ppid == pid {
				out = append(out, cpid)
			}
		}
	}
	return out
}

// KillPlugins SIGKILLs every plugin process of n (writd's children) and
// waits until writd has started new ones (the plugin host restarts a
// crashed plugin; docs/plugins.md) or d passed. It returns the killed
// processes and how long the restart took.
func (c *Cluster) KillPlugins(ctx context.Context, n *Node, d time.Duration) ([]int, time.Duration, error) {
	pid := n.Pid()
	if pid == 0 {
		return nil, 0, fmt.Errorf("robustness: %s is not running", n.Name)
	}
	victims := children(pid)
	if len(victims) == 0 {
		return nil, 0, fmt.Errorf("robustness: %s (pid %d) has no plugin process to kill", n.Name, pid)
	}
	for _, v := range victims {
		_ = syscall.Kill(v, syscall.SIGKILL)
	}
	t0 := time.Now()
	dead := map[int]bool{}
	for _, v := range victims {
		dead[v] = true
	}
	err := poll(ctx, d, func() (bool, string) {
		fresh := 0
		for _, x := range children(pid) {
			if !dead[x] && !zombie(x) {
				fresh++
			}
		}
		return fresh >= len(victims), fmt.Sprintf("%s restarted %d of %d plugin processes", n.Name, fresh, len(victims))
	})
	if err != nil {
		return victims, time.Since(t0), fmt.Errorf("robustness: plugins of %s not restarted: %w", n.Name, err)
	}
	return victims, time.Since(t0), nil
}

// zombie reports whether pid has exited and not yet been reaped.
func zombie(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true // gone
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || strings.HasPrefix(strings.TrimSpace(s[i+1:]), "Z")
}
