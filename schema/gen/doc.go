// Package gen turns a validated schema model (package ir) into Go source:
// a typed struct per payload with Validate compiled from the declared
// constraints, a stable binary encoding and a strict JSON decoder per type,
// the exhaustive classification switch, the per-machine guard tables, and a
// Catalog() implementing ir.Catalog.
//
// Generate renders every file in memory and refuses a schema with a
// BLOCKED or INCOMPLETE finding. Write stores the files all-or-nothing and
// removes generated files that are no longer produced; Check compares with
// what is on disk and returns a diff. Every generated file starts with
// Header and ends in _gen.go.
//
// The generated code imports schema/ir and schema/wire, the runtime its
// codecs call (shared with the runtime catalog), and nothing else of the
// module; it is never copied into the output.
//
// The package imports neither cuelang.org/go nor any runtime package.
package gen
