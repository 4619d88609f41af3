package conformance

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writ-dev/writ/examples/leases/leasesgen"
	"github.com/writ-dev/writ/schema/ir"
)

// A schema whose request and fact types are served by two plugin binaries:
// the leases handler built twice, once serving the lease.* types and once
// the holder.* types (testdata/leasessplit). Every tier must load both.

// splitPlugin builds the leases plugin serving only the types named
// prefix*.
func splitPlugin(t *testing.T, prefix string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "writ-leases-"+strings.TrimSuffix(prefix, "."))
	cmd := exec.Command("go", "build", "-o", path, "-ldflags", "-X main.prefix="+prefix, "./testdata/leasessplit")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the %s plugin: %v\n%s", prefix, err, out)
	}
	return path
}

func splitOptions(plugins ...string) Options {
	return Options{
		SchemaDir:  leasesSchema,
		PluginPath: plugins[0],
		Cluster:    ClusterOptions{Plugins: plugins[1:]},
		Catalogs:   []ir.Catalog{leasesgen.Catalog()},
		OpenState:  openRaftState,
		Only:       []Tier{TierStatic, TierProperty},
		Cases:      300,
	}
}

// TestSplitPluginsPropertyTier: with both plugins the static and property
// tiers pass, and the property tier's workload evaluated types of each
// plugin through that plugin's process.
func TestSplitPluginsPropertyTier(t *testing.T) {
	lease, holder := splitPlugin(t, "lease."), splitPlugin(t, "holder.")
	opts := splitOptions(lease, holder)

	env := newEnv(opts)
	t.Cleanup(env.close)
	p, err := env.startPlugin()
	if err != nil {
		t.Fatalf("starting both plugins: %v", err)
	}
	w := env.runWorkload(context.Background())
	if w.notRun != "" {
		t.Fatalf("workload did not run: %s", w.notRun)
	}
	byPlugin := map[string]int{}
	for typ, n := range w.evaluated {
		byPlugin[p.served[typ]] += n
		if p.served[typ] == "" {
			t.Errorf("evaluated %d items of %s, which no plugin serves", n, typ)
		}
	}
	t.Logf("items evaluated by type: %v", w.evaluated)
	for _, path := range []string{lease, holder} {
		if byPlugin[path] == 0 {
			t.Errorf("the workload evaluated no item through %s (evaluated: %v)", filepath.Base(path), w.evaluated)
		}
	}

	rep := mustRun(t, opts)
	requireAllPass(t, rep, []Tier{TierStatic, TierProperty}, nil)
	if !strings.Contains(rep.Plugin, filepath.Base(holder)) {
		t.Errorf("report names plugin(s) %q, want both", rep.Plugin)
	}
}

// TestSplitPluginsOneMissing: with only one of the two plugins the types of
// the other are served by none: static.plugin-types fails naming them and
// the checks that need the plugins do not pass.
func TestSplitPluginsOneMissing(t *testing.T) {
	rep := mustRun(t, splitOptions(splitPlugin(t, "lease.")))
	if rep.Summary.ExitCode == ExitPass {
		t.Fatal("exit code 0 with the holder.* plugin missing")
	}
	for _, c := range rep.Checks {
		switch {
		case c.ID == "static.plugin-types":
			if c.Result != Fail || len(c.Findings) == 0 || c.Findings[0].Code != CodePluginMissingType || !strings.Contains(c.Findings[0].Message, "holder.") {
				t.Errorf("static.plugin-types: %s %v, want FAIL %s naming the holder.* types", c.Result, c.Findings, CodePluginMissingType)
			}
		case c.ID == "property.eval-pure":
			if c.Result == Pass {
				t.Errorf("property.eval-pure passed with a plugin missing")
			}
		}
	}
}
