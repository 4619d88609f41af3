// Package schemadir turns a CUE schema package on disk into the runtime
// catalog a node runs (writd --schema DIR): schema/load parses and vets it,
// schema/runtimecat compiles every payload's constraints into Go closures
// once, so no CUE is evaluated on the request path.
//
// It is a package of its own so that programs embedding a node with a
// generated catalog do not link the CUE evaluator.
package schemadir

import (
	"fmt"
	"strings"

	"github.com/writ-dev/writ/schema/ir"
	"github.com/writ-dev/writ/schema/load"
	"github.com/writ-dev/writ/schema/runtimecat"
)

// Error is a schema that cannot run: it does not load, or vet finds
// BLOCKED or INCOMPLETE problems. Error() is one line per problem.
type Error struct {
	Dir string
	// Findings are the failing findings (empty when the directory did not
	// load at all).
	Findings []ir.Finding
	// Err is the load or catalog error when there are no findings.
	Err error
}

func (e *Error) Error() string {
	if len(e.Findings) == 0 {
		return fmt.Sprintf("schemadir: schema.dir %s: %v", e.Dir, e.Err)
	}
	lines := make([]string, 0, len(e.Findings)+1)
	for _, f := range e.Findings {
		lines = append(lines, "schemadir: "+f.String())
	}
	lines = append(lines, fmt.Sprintf("schemadir: schema.dir %s: %d finding(s) are BLOCKED or INCOMPLETE; nothing was started: fix them (`writ vet %s` shows the same findings)", e.Dir, len(e.Findings), e.Dir))
	return strings.Join(lines, "\n")
}

func (e *Error) Unwrap() error { return e.Err }

// Load loads the schema package in dir and builds its runtime catalog. The
// warnings are the findings that do not stop the schema (shown by
// `writ vet` too).
func Load(dir string) (cat ir.Catalog, warnings []ir.Finding, err error) {
	res, err := load.Dir(dir)
	if err != nil {
		return nil, nil, &Error{Dir: dir, Err: err}
	}
	if res.Failed() {
		var failing []ir.Finding
		for _, f := range res.Findings {
			if f.Fails() {
				failing = append(failing, f)
			}
		}
		return nil, nil, &Error{Dir: dir, Findings: failing}
	}
	cat, err = runtimecat.New(res.Schema)
	if err != nil {
		return nil, nil, &Error{Dir: dir, Err: err}
	}
	return cat, res.Findings, nil
}
