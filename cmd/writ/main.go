package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// cli carries the output streams and the exit code a command chose (0 ok,
// 1 failure or findings, 2 usage).
type cli struct {
	out, errw io.Writer
	code      int
}

// usageErr is a flag or argument error: one line naming the command's --help.
type usageErr struct {
	err  error
	path string
}

func (e *usageErr) Error() string { return fmt.Sprintf("%v: see `%s --help`", e.err, e.path) }

func run(args []string, stdout, stderr io.Writer) int {
	c := &cli{out: stdout, errw: stderr}
	root := c.root()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.Execute(); err != nil {
		var ue *usageErr
		if !errors.As(err, &ue) {
			// cobra's own argument errors (unknown command, …)
			err = &usageErr{err: err, path: "writ"}
		}
		fmt.Fprintf(stderr, "writ: %v\n", err)
		return 2
	}
	return c.code
}

func (c *cli) root() *cobra.Command {
	root := &cobra.Command{
		Use:   "writ",
		Short: "writ developer CLI: generate, vet, diff and graph a CUE schema; scaffold projects; run conformance",
		Long: `writ is the developer CLI of writ.

Run from the repository root, every command defaults to the reference
schema in examples/jobs/schema and its generated package examples/jobs/jobsgen.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.NoArgs,
		Version:       versionText(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(c.errw)
			_ = cmd.Help()
			c.code = 2
			return nil
		},
	}
	root.SetVersionTemplate("{{.Version}}")
	root.AddCommand(c.initCmd(), c.genCmd(), c.vetCmd(), c.schemaCmd(), c.conformanceCmd(), c.tableCmd(), c.certsCmd(), c.versionCmd())
	withUsageFix(root)
	return root
}

// flagCmd registers a command that parses its own arguments with package
// flag (the conformance suite, whose flags its plugin mains share): cobra
// passes everything after the name through, --help included.
func (c *cli) flagCmd(use, short string, f func(args []string, stdout, stderr io.Writer) int) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, DisableFlagParsing: true,
		Run: func(_ *cobra.Command, args []string) { c.code = f(args, c.out, c.errw) },
	}
}

// withUsageFix makes every flag and argument error of cmd and its
// subcommands one line (exit 2) that names the failing command's --help.
func withUsageFix(cmd *cobra.Command) {
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return &usageErr{err: err, path: c.CommandPath()} })
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if args := c.Args; args != nil {
			c.Args = func(c *cobra.Command, a []string) error {
				if err := args(c, a); err != nil {
					return &usageErr{err: err, path: c.CommandPath()}
				}
				return nil
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(cmd)
}

var errNoSubcommand = errors.New("want a subcommand")
