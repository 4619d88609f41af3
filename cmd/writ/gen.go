package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/schema/gen"
	"github.com/writ-dev/writ/schema/ir"
	"github.com/writ-dev/writ/schema/load"
)

const (
	defaultSchema = "examples/jobs/schema"
	defaultOut    = "examples/jobs/jobsgen"
)

func printFindings(w io.Writer, fs []ir.Finding, onlyFailing bool) {
	for _, f := range fs {
		if onlyFailing && !f.Fails() {
			continue
		}
		fmt.Fprintln(w, f.String())
	}
}

type genOptions struct {
	schema, out, pkg string
	check            bool
}

func (c *cli) genCmd() *cobra.Command {
	var o genOptions
	cmd := &cobra.Command{
		Use:   "gen [--schema DIR] [--out DIR] [--package NAME] [--check]",
		Short: "generate Go from the schema; --check regenerates in memory and exits 1 with a diff when the files on disk are stale",
		Args:  noArgsFix("use --schema DIR"),
		Run:   func(*cobra.Command, []string) { c.code = cmdGen(o, c.out, c.errw) },
	}
	fl := cmd.Flags()
	fl.StringVar(&o.schema, "schema", defaultSchema, "directory holding the CUE schema package")
	fl.StringVar(&o.out, "out", defaultOut, "output directory for the generated *_gen.go files")
	fl.StringVar(&o.pkg, "package", "", "Go package name (default: the schema's go_package, else the output directory's name)")
	fl.BoolVar(&o.check, "check", false, "do not write; exit 1 with a diff if the generated files are stale")
	return cmd
}

// noArgsFix refuses positional arguments, naming the flag to use instead.
func noArgsFix(fix string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("unexpected argument %q (fix: %s)", args[0], fix)
		}
		return nil
	}
}

func cmdGen(o genOptions, stdout, stderr io.Writer) int {
	schemaDir, out, pkg, check := &o.schema, &o.out, &o.pkg, &o.check
	res, err := load.Dir(*schemaDir)
	if err != nil {
		fmt.Fprintf(stderr, "writ gen: %v\n", err)
		return 1
	}
	if res.Failed() {
		printFindings(stderr, res.Findings, true)
		fmt.Fprintf(stderr, "writ gen: %s has errors; nothing was written\n", *schemaDir)
		return 1
	}
	for _, f := range res.Findings {
		fmt.Fprintf(stderr, "warning: %s\n", f)
	}
	name := *pkg
	if name == "" {
		name = res.Schema.Package
	}
	if name == "" {
		name = filepath.Base(filepath.Clean(*out))
	}
	files, err := gen.Generate(res.Schema, gen.Options{Package: name, Source: filepath.ToSlash(*schemaDir)})
	if err != nil {
		fmt.Fprintf(stderr, "writ gen: %v\nnothing was written\n", err)
		return 1
	}
	if *check {
		diff, err := gen.Check(*out, files)
		if err != nil {
			fmt.Fprintf(stderr, "writ gen --check: %v\n", err)
			return 1
		}
		if diff != "" {
			fmt.Fprint(stdout, diff)
			fmt.Fprintf(stderr, "writ gen --check: %s is stale (fix: run `writ gen` or `make gen` and commit the result)\n", *out)
			return 1
		}
		fmt.Fprintf(stdout, "writ gen --check: %s is up to date (%d files, fingerprint %s)\n", *out, len(files), res.Schema.Fingerprint())
		return 0
	}
	if err := gen.Write(*out, files); err != nil {
		fmt.Fprintf(stderr, "writ gen: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "writ gen: wrote %d files to %s (fingerprint %s)\n", len(files), *out, res.Schema.Fingerprint())
	return 0
}
