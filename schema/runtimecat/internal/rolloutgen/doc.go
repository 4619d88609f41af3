// Package rolloutgen is the generated catalog of the rollout test schema
// (schema/runtimecat/testdata/rollout), the second schema the runtime
// catalog is oracle-tested against. Regenerate, in schema/runtimecat, with
//
//	go run ../../cmd/writ gen --schema testdata/rollout --out internal/rolloutgen
//
// TestRolloutGenIsFresh fails when it is stale.
package rolloutgen
