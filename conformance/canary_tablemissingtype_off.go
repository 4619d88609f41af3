//go:build !canary_tablemissingtype

package conformance

import "github.com/writ-dev/writ/schema/ir"

// canaryCatalog returns the generated catalog unchanged; only a build with
// the `canary_tablemissingtype` tag (the suite's own tests) breaks it.
func canaryCatalog(c ir.Catalog) ir.Catalog { return c }
