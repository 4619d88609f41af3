package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"

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

func cmdGen(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("writ gen", flag.ContinueOnError)
	fl.SetOutput(stderr)
	schemaDir := fl.String("schema", defaultSchema, "directory holding the CUE schema package")
	out := fl.String("out", defaultOut, "output directory for the generated *_gen.go files")
	pkg := fl.String("package", "", "Go package name (default: the schema's go_package, else the output directory's name)")
	check := fl.Bool("check", false, "do not write; exit 1 with a diff if the generated files are stale")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "writ gen: unexpected argument %q (fix: use --schema DIR)\n", fl.Arg(0))
		return 2
	}
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
