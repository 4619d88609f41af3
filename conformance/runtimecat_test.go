package conformance

import "testing"

// TestRuntimeCatalogForAnySchema: a schema with no generated catalog linked
// in (the rollout test schema of schema/runtimecat) gets its
// generated-code checks run over the runtime catalog instead of NOT RUN.
func TestRuntimeCatalogForAnySchema(t *testing.T) {
	rep := mustRun(t, Options{SchemaDir: "../schema/runtimecat/testdata/rollout", Only: []Tier{TierStatic, TierProperty}, Cases: 300,
		checks: []string{"static.table-complete", "property.validate-cue", "property.codec-roundtrip"}})
	for _, id := range []string{"static.table-complete", "property.validate-cue", "property.codec-roundtrip"} {
		if c, _ := rep.Check(id); c.Result != Pass {
			t.Errorf("%s: %s (%q) %v, want PASS over the runtime catalog", id, c.Result, c.Reason, c.Findings)
		}
	}
}
