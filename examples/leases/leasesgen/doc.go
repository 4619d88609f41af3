// Package leasesgen is the Go generated from the lease service example
// schema (examples/leases/schema): a typed payload per entry type with
// Validate, a stable binary encoding and a strict JSON decoder; the
// exhaustive classification switch (Classify); the lease and holder guard
// tables; and Catalog(), which implements ir.Catalog. Every *_gen.go file is
// produced by `writ gen --schema examples/leases/schema --out
// examples/leases/leasesgen` (`make gen`) and must not be edited.
package leasesgen

//go:generate sh -c "cd ../../.. && go run ./cmd/writ gen --schema examples/leases/schema --out examples/leases/leasesgen"
