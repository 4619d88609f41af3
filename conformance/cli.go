package conformance

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/writ-dev/writ/schema/ir"
)

// Main runs `writ conformance` with args (without the subcommand name) and
// returns the process exit code. catalogs are the generated catalogs linked
// into the binary.
func Main(args []string, stdout, stderr io.Writer, catalogs []ir.Catalog) int {
	return MainLinked(args, stdout, stderr, Linked{Catalogs: catalogs})
}

// Linked is what the calling binary links for the suite: the generated
// catalogs and the replicated state machine (see Options).
type Linked struct {
	Catalogs  []ir.Catalog
	OpenState StateOpener
}

// MainLinked is Main with everything the binary links.
func MainLinked(args []string, stdout, stderr io.Writer, l Linked) int {
	fs := flag.NewFlagSet("writ conformance", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		opts  Options
		only  string
		asJS  bool
		list  bool
		seed  uint64
		hosts string
	)
	fs.StringVar(&opts.SchemaDir, "schema", "", "directory holding the schema's .cue files (or its parent)")
	var plugins pluginList
	fs.Var(&plugins, "plugin", "a handler plugin binary (repeat for a schema served by several plugins)")
	fs.StringVar(&opts.GenDir, "gen", "", "directory of the generated *_gen.go files (default: found next to the schema)")
	fs.StringVar(&only, "only", "", "comma-separated tiers to run: static, property, cluster (default all)")
	fs.BoolVar(&asJS, "json", false, "print the report as JSON")
	fs.BoolVar(&list, "list", false, "print the invariant → check map and exit")
	fs.IntVar(&opts.Cases, "cases", DefaultCases, "generated cases per property check")
	fs.Uint64Var(&seed, "seed", 1, "seed for generated cases (reports are reproducible per seed)")
	fs.StringVar(&opts.Cluster.Writd, "writd", "", "writd binary for the cluster tier, run with --schema and --plugin (default: the writd next to writ, then on PATH)")
	fs.StringVar(&hosts, "cluster-hosts", "", "comma-separated loopback addresses for the 3 cluster nodes (default 127.0.0.1)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: writ conformance --schema DIR --plugin PATH [--plugin PATH…] [--writd BIN] [--json] [--only static|property|cluster] [--cases N] [--list]\n\n")
		fs.PrintDefaults()
		fmt.Fprintf(stderr, "\nexit status: 0 every selected check passed; 1 a check failed (BLOCKED or INCOMPLETE) or could not run; 2 usage error\n")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitPass
		}
		return ExitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "writ conformance: unexpected argument %q (fix: pass the schema with --schema DIR)\n", fs.Arg(0))
		return ExitUsage
	}
	if list {
		if err := WriteList(stdout); err != nil {
			fmt.Fprintln(stderr, err)
			return ExitUsage
		}
		return ExitPass
	}
	for _, t := range strings.Split(only, ",") {
		if t = strings.TrimSpace(t); t == "" {
			continue
		}
		tier, ok := ParseTier(t)
		if !ok {
			fmt.Fprintf(stderr, "writ conformance: --only %q: unknown tier (fix: use static, property or cluster)\n", t)
			return ExitUsage
		}
		opts.Only = append(opts.Only, tier)
	}
	if len(plugins) > 0 {
		opts.PluginPath, opts.Cluster.Plugins = plugins[0], plugins[1:]
	}
	if hosts != "" {
		opts.Cluster.Hosts = strings.Split(hosts, ",")
	}
	opts.Seed = seed
	opts.Catalogs = l.Catalogs
	opts.OpenState = l.OpenState
	opts.Progress = stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := Run(ctx, opts)
	if err != nil {
		fmt.Fprintf(stderr, "writ %v\n", err)
		return ExitUsage
	}
	if asJS {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return ExitFail
	}
	return rep.Summary.ExitCode
}

// pluginList is the repeatable --plugin flag.
type pluginList []string

func (p *pluginList) String() string { return strings.Join(*p, ",") }

func (p *pluginList) Set(v string) error {
	if v == "" {
		return errors.New("empty plugin path (fix: --plugin PATH)")
	}
	*p = append(*p, v)
	return nil
}
