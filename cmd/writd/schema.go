package main

import (
	"errors"
	"io"

	"github.com/writ-dev/writ/examples/jobs/jobsgen"
	"github.com/writ-dev/writ/node/config"
	"github.com/writ-dev/writ/schema/ir"
)

// jobsPlugin is the handler looked up next to writd (then on PATH) when the
// embedded jobs schema runs and no plugins are configured.
const jobsPlugin = "writ-jobs"

// catalogFor picks the schema this node runs: the CUE package in
// schema.dir, else the embedded jobs schema. It also returns the plugin
// binary to look for when none is configured ("" = none).
func catalogFor(cfg *config.Node, _ io.Writer) (ir.Catalog, string, error) {
	if cfg.SchemaDir != "" {
		return nil, "", errors.New("schema.dir: not supported by this build")
	}
	return jobsgen.Catalog(), jobsPlugin, nil
}
