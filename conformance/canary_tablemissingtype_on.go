//go:build canary_tablemissingtype

package conformance

import "github.com/writ-dev/writ/schema/ir"

// canaryCatalog, in a build with the `canary_tablemissingtype` tag (used
// only by the suite's own tests), hides the first fact type from the
// generated classification table the suite checks: a deliberately broken
// build that static.table-complete must fail.
func canaryCatalog(c ir.Catalog) ir.Catalog {
	for _, td := range c.Types() {
		if td.Class == ir.ClassFact {
			return missingType{c, td.Name}
		}
	}
	return c
}

// missingType is a catalog without the type named hide.
type missingType struct {
	ir.Catalog
	hide string
}

func (m missingType) Type(name string) (*ir.TypeDesc, bool) {
	if name == m.hide {
		return nil, false
	}
	return m.Catalog.Type(name)
}

func (m missingType) Types() []*ir.TypeDesc {
	var out []*ir.TypeDesc
	for _, td := range m.Catalog.Types() {
		if td.Name != m.hide {
			out = append(out, td)
		}
	}
	return out
}
