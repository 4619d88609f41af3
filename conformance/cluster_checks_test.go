package conformance

import (
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/writ-dev/writ/schema/ir"
)

// clusterHosts are the loopback addresses of the scenario tests below.
var clusterHosts = []string{"127.0.13.1", "127.0.13.2", "127.0.13.3"}

var (
	writdMu    sync.Mutex
	writdBuilt = map[string]string{}
)

// jobsWritd builds writd (with the given build tags) once per test process.
func jobsWritd(t *testing.T, tags string) string {
	t.Helper()
	writdMu.Lock()
	defer writdMu.Unlock()
	if p, ok := writdBuilt[tags]; ok {
		return p
	}
	jobsPlugin(t) // makes pluginDir
	bin := filepath.Join(pluginDir, "writd"+strings.ReplaceAll(tags, ",", "_"))
	args := []string{"build", "-o", bin}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	if out, err := exec.Command("go", append(args, "github.com/writ-dev/writ/cmd/writd")...).CombinedOutput(); err != nil {
		t.Fatalf("go build writd (tags %q): %v\n%s", tags, err, out)
	}
	writdBuilt[tags] = bin
	return bin
}

// clusterCheckOptions runs the named cluster checks over the jobs domain on
// a real 3-node cluster.
func clusterCheckOptions(t *testing.T, checks ...string) Options {
	if testing.Short() {
		t.Skip("runs real writd processes: skipped with -short")
	}
	opts := jobsOptions(t, TierCluster)
	opts.Cluster.Writd = jobsWritd(t, "")
	opts.Cluster.Hosts = clusterHosts
	opts.checks = checks
	return opts
}

// TestConfigMajorityDownNeedsActivation: the scenario first shows that an
// upgrade activates with every node up. A configuration that can never
// activate (every document refused at ingress, a double) makes it NOT RUN
// with the reason; before, the refusal satisfied it and it passed.
func TestConfigMajorityDownNeedsActivation_FakeRefusedDoc(t *testing.T) {
	const id = "cluster.config-majority-down"
	opts := clusterCheckOptions(t, id)
	opts.doubles.configDoc = func([]byte) []byte { return []byte(`{"version":"not a version"}`) }
	c, _ := mustRun(t, opts).Check(id)
	if c.Result != NotRun || !strings.Contains(c.Reason, "did not activate") {
		t.Fatalf("%s with a configuration that never activates: %s %q %v, want NOT RUN (did not activate)", id, c.Result, c.Reason, c.Findings)
	}
	t.Logf("%s: %s", c.Result, c.Reason)
}

// TestFactsExactlyOnceWithoutWatch_FakeWatchFails: when no watch stream can
// be read, the exactly-once count is not skipped: it comes from every
// node's dedup table, and a REVIEW_REQUIRED finding says so.
func TestFactsExactlyOnceWithoutWatch_FakeWatchFails(t *testing.T) {
	const id = "cluster.facts-restart"
	opts := clusterCheckOptions(t, id)
	opts.doubles.watchFails = true
	c, _ := mustRun(t, opts).Check(id)
	if c.Result != Pass || len(c.Findings) != 1 || c.Findings[0].Status != ir.StatusReviewRequired || !strings.Contains(c.Findings[0].Message, "dedup table") {
		t.Fatalf("%s with every watch failing: %s %q %v, want PASS with a REVIEW_REQUIRED finding naming the dedup tables", id, c.Result, c.Reason, c.Findings)
	}
}
