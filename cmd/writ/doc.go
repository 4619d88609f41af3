// Command writ is the developer CLI of writ: it generates Go from a CUE
// schema (gen, gen --check), reports static findings (vet), compares two
// schemas for a rolling upgrade (schema diff), runs the conformance suite
// (conformance) and prints the classification table of the embedded jobs
// schema or of any schema directory (table).
//
// Run from the repository root, every command defaults to the reference
// schema in examples/jobs/schema and its generated package
// examples/jobs/jobsgen.
package main
