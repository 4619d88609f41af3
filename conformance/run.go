package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	"github.com/writ-dev/writ/schema/ir"
	"github.com/writ-dev/writ/schema/load"
	"github.com/writ-dev/writ/schema/runtimecat"
)

// DefaultCases is the number of generated cases each property check runs
// when Options.Cases is zero.
const DefaultCases = 10000

// Options configures one suite run.
type Options struct {
	// SchemaDir holds the user's .cue files (or a directory whose schema/
	// subdirectory does). Required.
	SchemaDir string
	// GenDir holds the generated *_gen.go files for the schema. Empty:
	// <SchemaDir>/<go_package>, then the sibling <dir>/../<go_package>.
	GenDir string
	// PluginPath is the user's handler plugin binary; a schema served by
	// several plugins lists the others in Cluster.Plugins, and every tier
	// loads them all. None: every check that needs the plugin is NOT RUN.
	PluginPath string
	// Only selects tiers; empty selects all. Checks of other tiers are
	// reported NOT RUN (not selected) and do not affect the exit code.
	Only []Tier
	// Cases is the number of generated cases per property check (default
	// DefaultCases).
	Cases int
	// Seed makes generated cases reproducible (default 1).
	Seed uint64
	// Catalogs are the generated catalogs linked into the calling binary;
	// the one whose fingerprint equals the loaded schema's is the
	// generated code under test. Checks that need generated code are NOT
	// RUN when none matches.
	Catalogs []ir.Catalog
	// OpenState opens the replicated state machine's state file, for
	// property.apply-idempotent (writ passes raftstore.OpenReplayState).
	// Nil: that check is NOT RUN.
	OpenState StateOpener
	// Cluster configures the cluster tier.
	Cluster ClusterOptions
	// Progress receives one line per check as it starts (optional; not
	// part of the report).
	Progress io.Writer

	// doubles replace real components in the suite's own canary tests.
	doubles doubles
	// checks, when set, narrows the run to these check IDs (the suite's
	// own tests use it to keep canary runs short).
	checks []string
}

// Env is what a check sees: the options, the loaded schema, the matching
// generated catalog and (lazily) the started plugin.
type Env struct {
	Opts Options
	// Dir is the resolved schema directory.
	Dir string
	// Load is the loader's result (nil with LoadErr set when the directory
	// could not be read at all).
	Load    *load.Result
	LoadErr error
	// Schema is the loaded model (nil when the schema has failing findings).
	Schema *ir.Schema
	// Catalog is the generated catalog under test, or the runtime catalog
	// of the schema when none of Options.Catalogs matches it (nil only
	// when that cannot be built).
	Catalog ir.Catalog

	catalogErr error // why the runtime catalog could not be built

	tmp     string
	pluginO sync.Once
	plugin  *pluginHandle
	plugErr error
	wl      workload
	cl      *cluster
	clErr   string
}

// Run executes the selected checks and returns the deterministic report. It
// returns an error only for unusable options; everything the suite finds
// is in the report.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if opts.SchemaDir == "" {
		return nil, errors.New("conformance: --schema is required (the directory holding the schema's .cue files)")
	}
	if opts.Cases < 0 {
		return nil, fmt.Errorf("conformance: --cases %d is negative; give a positive number of cases", opts.Cases)
	}
	if opts.Cases == 0 {
		opts.Cases = DefaultCases
	}
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	selected := map[Tier]bool{}
	for _, t := range opts.Only {
		if _, ok := ParseTier(string(t)); !ok {
			return nil, fmt.Errorf("conformance: unknown tier %q; use static, property or cluster", t)
		}
		selected[t] = true
	}
	if len(selected) == 0 {
		for _, t := range Tiers {
			selected[t] = true
		}
	}
	env := newEnv(opts)
	defer env.close()
	rep := &Report{Schema: filepath.ToSlash(opts.SchemaDir), Plugin: strings.Join(opts.pluginPaths(), ","), Cases: opts.Cases, Seed: opts.Seed}
	if env.Schema != nil {
		rep.Fingerprint = env.Schema.Fingerprint()
	}
	for _, t := range Tiers {
		if selected[t] {
			rep.Tiers = append(rep.Tiers, t)
		}
	}
	for _, c := range Checks() {
		cr := CheckResult{ID: c.ID, Tier: c.Tier, Invariants: c.Invariants, Title: c.Title, Selected: selected[c.Tier]}
		if len(opts.checks) > 0 && !slices.Contains(opts.checks, c.ID) {
			cr.Selected = false
		}
		if !cr.Selected {
			cr.Result, cr.Reason = NotRun, fmt.Sprintf("tier %s not selected", c.Tier)
			if selected[c.Tier] {
				cr.Reason = "check not selected"
			}
			rep.Checks = append(rep.Checks, cr)
			continue
		}
		if opts.Progress != nil {
			fmt.Fprintf(opts.Progress, "conformance: running %s\n", c.ID)
		}
		out := runOne(ctx, c, env)
		cr.Findings, cr.Cases = out.Findings, out.Cases
		if out.NotRun != "" {
			cr.Result, cr.Reason = NotRun, out.NotRun
		}
		rep.Checks = append(rep.Checks, cr)
	}
	rep.finalize()
	return rep, nil
}

func runOne(ctx context.Context, c *Check, env *Env) (out Outcome) {
	defer func() {
		if r := recover(); r != nil {
			out = Outcome{Findings: []Finding{{
				Code: CodeCheckCrashed, Status: ir.StatusBlocked, Subject: c.ID,
				Message: fmt.Sprintf("the check panicked: %v", r),
				Fix:     "a panic here is a defect in the component under test or in the suite; the stack is on stderr",
			}}}
			fmt.Fprintf(os.Stderr, "conformance: %s panicked: %v\n%s", c.ID, r, debug.Stack())
		}
	}()
	if err := ctx.Err(); err != nil {
		return notRun("cancelled before it ran: %v", err)
	}
	return c.Run(ctx, env)
}

func newEnv(opts Options) *Env {
	env := &Env{Opts: opts}
	env.Dir = resolveSchemaDir(opts.SchemaDir)
	env.Load, env.LoadErr = load.Dir(env.Dir)
	if env.Load != nil {
		env.Schema = env.Load.Schema
	}
	if env.Schema != nil {
		fp := env.Schema.Fingerprint()
		for _, c := range opts.Catalogs {
			if c != nil && c.Fingerprint() == fp {
				env.Catalog = c
				break
			}
		}
		if env.Catalog == nil {
			// No generated catalog of this schema is linked in: check the
			// runtime catalog, the one a stock writd --schema serves.
			env.Catalog, env.catalogErr = runtimecat.New(env.Schema)
		}
		if env.Catalog != nil {
			env.Catalog = canaryCatalog(env.Catalog)
		}
	}
	return env
}

// resolveSchemaDir accepts either the directory holding the .cue files or
// its parent when the files are in a schema/ subdirectory.
func resolveSchemaDir(dir string) string {
	if hasCUE(dir) {
		return dir
	}
	if sub := filepath.Join(dir, "schema"); hasCUE(sub) {
		return sub
	}
	return dir
}

func hasCUE(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".cue") {
			return true
		}
	}
	return false
}

func (e *Env) close() {
	if e.cl != nil {
		e.cl.close()
	}
	if e.plugin != nil {
		e.plugin.close()
	}
	if e.tmp != "" {
		os.RemoveAll(e.tmp)
	}
}

// needSchema is the NOT RUN reason shared by checks that need a loaded
// schema.
func (e *Env) needSchema() (string, bool) {
	switch {
	case e.LoadErr != nil:
		return fmt.Sprintf("the schema could not be read: %v", e.LoadErr), false
	case e.Schema == nil:
		return "the schema did not load (see static.schema-loads)", false
	}
	return "", true
}

// needCatalog is the NOT RUN reason shared by checks that need generated
// code.
func (e *Env) needCatalog() (string, bool) {
	if r, ok := e.needSchema(); !ok {
		return r, false
	}
	if e.Catalog == nil {
		return fmt.Sprintf("no generated catalog with fingerprint %s is linked into this binary and the runtime catalog could not be built: %v", e.Schema.Fingerprint(), e.catalogErr), false
	}
	return "", true
}
