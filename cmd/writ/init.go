package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/writ-dev/writ/cmd/writ/internal/scaffold"
)

// cmdInit scaffolds a new control-plane project (see scaffold).
func cmdInit(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("writ init", flag.ContinueOnError)
	fl.SetOutput(stderr)
	var o scaffold.Options
	fl.StringVar(&o.Module, "module", "", "Go module path of the new project (default example.com/NAME)")
	fl.StringVar(&o.Name, "name", "", "project name: CUE package, plugin writ-NAME, config type NAME.config (default: from DIR)")
	fl.StringVar(&o.WritVersion, "writ-version", "", "writ module version to require (default: this writ's, else v0.0.0)")
	fl.StringVar(&o.Replace, "replace", "", "build against the writ source tree at this directory (adds a replace to go.mod)")
	fl.Usage = func() {
		fmt.Fprintf(stderr, "usage: writ init DIR [--module PATH] [--name NAME] [--replace WRIT_SRC]\n\n")
		fl.PrintDefaults()
	}
	// DIR may come before or after the flags.
	var dir string
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		dir, args = args[0], args[1:]
	}
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if dir == "" && fl.NArg() > 0 {
		dir = fl.Arg(0)
		if err := fl.Parse(fl.Args()[1:]); err != nil {
			return 2
		}
	}
	if dir == "" || fl.NArg() > 0 {
		fmt.Fprintln(stderr, "writ init: want exactly one directory (fix: writ init DIR [--module PATH] [--name NAME])")
		return 2
	}
	o.Dir = dir
	files, err := scaffold.Write(o)
	if err != nil {
		fmt.Fprintf(stderr, "writ %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "writ init: wrote %d files to %s\n", len(files), dir)
	fmt.Fprintf(stdout, "next: cd %s && make && make cluster && make conformance (see README.md)\n", dir)
	return 0
}
