package conformance

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/raftstore"
	"github.com/writ-dev/writ/schema/ir"
)

const jobsSchema = "../examples/jobs/schema"

var (
	pluginOnce sync.Once
	pluginPath string
	pluginErr  error
	pluginDir  string
)

// jobsPlugin builds the real jobs plugin binary once per test process.
func jobsPlugin(t *testing.T) string {
	t.Helper()
	pluginOnce.Do(func() {
		dir, err := osMkdirTemp()
		if err != nil {
			pluginErr = err
			return
		}
		pluginDir = dir
		pluginPath = filepath.Join(dir, "writ-jobs")
		out, err := exec.Command("go", "build", "-o", pluginPath, "github.com/writ-dev/writ/examples/jobs/cmd/writ-jobs").CombinedOutput()
		if err != nil {
			pluginErr = err
			t.Logf("%s", out)
		}
	})
	if pluginErr != nil {
		t.Fatalf("building the jobs plugin: %v", pluginErr)
	}
	return pluginPath
}

func jobsOptions(t *testing.T, tiers ...Tier) Options {
	return Options{
		SchemaDir:  jobsSchema,
		PluginPath: jobsPlugin(t),
		Catalogs:   []ir.Catalog{jobsgen.Catalog()},
		OpenState:  openRaftState,
		Only:       tiers,
		Cases:      2000,
	}
}

// openRaftState opens raftstore's real applied state (a bbolt file), as
// writ does for property.apply-idempotent.
func openRaftState(path string) (ReplayState, error) {
	st, err := raftstore.OpenReplayState(path)
	if err != nil {
		return nil, err
	}
	return st, nil
}

func mustRun(t *testing.T, opts Options) *Report {
	t.Helper()
	rep, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestJobsStatic(t *testing.T) {
	rep := mustRun(t, jobsOptions(t, TierStatic))
	for _, c := range rep.Checks {
		if c.Tier != TierStatic {
			if c.Result != NotRun || c.Selected {
				t.Errorf("%s: unselected tier reported %s", c.ID, c.Result)
			}
			continue
		}
		if c.Result != Pass {
			t.Errorf("%s: %s %s %v", c.ID, c.Result, c.Reason, c.Findings)
		}
	}
	if rep.Summary.ExitCode != ExitPass {
		t.Errorf("exit code %d, want 0", rep.Summary.ExitCode)
	}
}

func osMkdirTemp() (string, error) { return os.MkdirTemp("", "writ-conformance-test-") }

func TestMain(m *testing.M) {
	code := m.Run()
	if pluginDir != "" {
		os.RemoveAll(pluginDir)
	}
	os.Exit(code)
}
