package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/node"
	"github.com/writ-dev/writ/node/config"
)

func main() {
	privateUmask()
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

// Exit codes (docs/operator.md).
const (
	exitFatal  = 1 // a fatal runtime error: restarting recovers from disk
	exitConfig = 2 // bad configuration or flags, or the node could not start
	exitApply  = 3 // fatal apply stop: a committed entry cannot be applied
	// exitNotLeft: SIGTERM found facts in the outbox that did not commit
	// in time, so the node stopped as a member instead of leaving.
	exitNotLeft = 4
)

func run(args, env []string, stdout, stderr io.Writer) int {
	code := 0
	root := &cobra.Command{
		Use:           "writd",
		Short:         "Run one writ node (no configuration: a single-node dev cluster)",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(config.Options{Flags: cmd.Flags(), Env: env})
			if err != nil {
				return err
			}
			cat, search, err := catalogFor(cfg, stderr)
			if err != nil {
				return err
			}
			n, err := node.Start(cfg, node.Options{Catalog: cat, LogOutput: stderr, PluginName: search})
			if err != nil {
				return err
			}
			mode := "cluster node"
			if cfg.Dev {
				mode = "single-node dev cluster"
			}
			data := n.DataDir()
			if n.TempDir() {
				data += " (temporary, removed on exit)"
			}
			fmt.Fprintf(stdout, "writd %s %s (%s)\n  api     %s\n  raft    %s\n  gossip  %s\n  data    %s\n  try     writctl --addr %s status\n",
				cfg.NodeID, node.Version, mode, n.APIAddr(), n.RaftAddr(), n.GossipAddr(), data, n.APIAddr())
			if a := n.MetricsAddr(); a != "" {
				fmt.Fprintf(stdout, "  metrics http://%s/metrics (health: /livez /readyz /healthz)\n  ui      http://%s/ui/\n", a, a)
			}
			sig := make(chan os.Signal, 2)
			signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
			defer signal.Stop(sig)
			switch s, err := waitSignal(sig, n); {
			case err != nil:
				code = fatalCode(stderr, n, err)
				n.Stop()
			case s == syscall.SIGTERM:
				fmt.Fprintln(stdout, "writd: SIGTERM: leaving the cluster")
				if err := n.Leave(); err != nil {
					fmt.Fprintf(stderr, "writd: %v\n", err)
					code = exitNotLeft
				}
			default:
				fmt.Fprintln(stdout, "writd: SIGINT: stopping (still a member; restart to rejoin)")
				n.Stop()
			}
			if n.TempDir() {
				_ = os.RemoveAll(n.DataDir())
			}
			return nil
		},
	}
	config.AddFlags(root.Flags())
	// --version names the embedded schema; a node run with --schema logs
	// and reports the fingerprint of the schema it loaded.
	addVersion(root, jobsgen.Catalog().Fingerprint())
	root.AddCommand(recoverCmd(stdout, stderr))
	withUsageFix(root)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.Execute(); err != nil {
		// a schema that does not vet is one line per finding
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(stderr, "writd: %s\n", line)
		}
		return exitConfig
	}
	return code
}
