package robustness

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
)

// firewall cuts traffic between node addresses with nftables, in a table of
// its own named for the run: it adds rules only for the run's addresses and
// removes exactly its table. Nodes dial every peer connection from their own
// address (raft, gossip UDP and TCP, API forwarding), so a rule between two
// addresses is a real partition; clients dial from other addresses and keep
// reaching every node.
type firewall struct {
	table string
	mu    sync.Mutex
	up    bool
}

// partitionsAvailable reports whether nft can be run, installing nftables
// with apt-get when it is missing and the process may (root).
func partitionsAvailable() error {
	if err := ensureTool("nft", "nftables"); err != nil {
		return err
	}
	return removeStaleTables()
}

func nft(args ...string) error {
	var out bytes.Buffer
	cmd := exec.Command("nft", args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("robustness: nft %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// cut drops every packet from each address in a to each address in b (and
// back when both is set).
func (f *firewall) cut(a, b []string, both bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.up {
		if err := nft("add", "table", "inet", f.table); err != nil {
			return err
		}
		f.up = true
		if err := nft("add", "chain", "inet", f.table, "out", "{ type filter hook output priority 0 ; policy accept ; }"); err != nil {
			return err
		}
	}
	for _, x := range a {
		for _, y := range b {
			if err := nft("add", "rule", "inet", f.table, "out", "ip", "saddr", x, "ip", "daddr", y, "drop"); err != nil {
				return err
			}
			if both {
				if err := nft("add", "rule", "inet", f.table, "out", "ip", "saddr", y, "ip", "daddr", x, "drop"); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// heal removes the run's table (and only it).
func (f *firewall) heal() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.up {
		return nil
	}
	if err := nft("delete", "table", "inet", f.table); err != nil {
		return err
	}
	f.up = false
	return nil
}

// tablePrefix names every table the suite makes: writ_robustness_<pid>_<n>,
// n counting the process's firewalls (runs may go on in parallel).
const tablePrefix = "writ_robustness_"

var firewalls atomic.Uint64

func newFirewall() *firewall {
	return &firewall{table: fmt.Sprintf("%s%d_%d", tablePrefix, os.Getpid(), firewalls.Add(1))}
}

// removeStaleTables deletes the suite's tables whose process is gone (a
// test binary killed before it could heal), so that they cannot cut a later
// run's addresses. Tables of live processes and every other table are left
// alone.
func removeStaleTables() error {
	out, err := exec.Command("nft", "list", "tables").CombinedOutput()
	if err != nil {
		return fmt.Errorf("robustness: nft list tables: %v: %s", err, lastLine(out))
	}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 || f[0] != "table" || f[1] != "inet" || !strings.HasPrefix(f[2], tablePrefix) {
			continue
		}
		var pid int
		var seed uint64
		if _, err := fmt.Sscanf(strings.TrimPrefix(f[2], tablePrefix), "%d_%d", &pid, &seed); err != nil || pid <= 0 {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			continue
		}
		if err := nft("delete", "table", "inet", f[2]); err != nil {
			return err
		}
	}
	return nil
}
