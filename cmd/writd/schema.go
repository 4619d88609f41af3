package main

import (
	"fmt"
	"io"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/node/config"
	"github.com/writ-dev/writ/node/schemadir"
	"github.com/writ-dev/writ/schema/ir"
)

// jobsPlugin is the handler looked up next to writd (then on PATH) when the
// embedded jobs schema runs and no plugins are configured.
const jobsPlugin = "writ-jobs"

// catalogFor picks the schema this node runs: the CUE package in
// schema.dir (compiled into a runtime catalog), else the embedded jobs
// schema. It also returns the plugin binary to look for when none is
// configured ("" = none: a user schema names its plugins).
func catalogFor(cfg *config.Node, stderr io.Writer) (ir.Catalog, string, error) {
	if cfg.SchemaDir == "" {
		return jobsgen.Catalog(), jobsPlugin, nil
	}
	cat, warnings, err := schemadir.Load(cfg.SchemaDir)
	if err != nil {
		return nil, "", err
	}
	for _, f := range warnings {
		fmt.Fprintf(stderr, "writd: schema warning: %s\n", f)
	}
	return cat, "", nil
}
