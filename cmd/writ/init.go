package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/cmd/writ/internal/scaffold"
)

func (c *cli) initCmd() *cobra.Command {
	var o scaffold.Options
	cmd := &cobra.Command{
		Use:   "init DIR",
		Short: "scaffold a new control-plane project: a schema, its generated Go, a handler plugin with tests, a Makefile and a README",
		Args:  cobra.ExactArgs(1),
		Run: func(_ *cobra.Command, args []string) {
			o.Dir = args[0]
			c.code = cmdInit(o, c.out, c.errw)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Module, "module", "", "Go module path of the new project (default example.com/NAME)")
	fl.StringVar(&o.Name, "name", "", "project name: CUE package, plugin writ-NAME, config type NAME.config (default: from DIR)")
	fl.StringVar(&o.WritVersion, "writ-version", "", "writ module version to require (default: this writ's, else v0.0.0)")
	fl.StringVar(&o.Replace, "replace", "", "build against the writ source tree at this directory (adds a replace to go.mod)")
	return cmd
}

// cmdInit scaffolds a new control-plane project (see scaffold).
func cmdInit(o scaffold.Options, stdout, stderr io.Writer) int {
	dir := o.Dir
	files, err := scaffold.Write(o)
	if err != nil {
		fmt.Fprintf(stderr, "writ %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "writ init: wrote %d files to %s\n", len(files), dir)
	fmt.Fprintf(stdout, "next: cd %s && make && make cluster && make conformance (see README.md)\n", dir)
	return 0
}
