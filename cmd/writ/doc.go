// Command writ is the developer CLI of writ: it generates Go from a CUE
// schema (gen, gen --check), reports static findings (vet), compares two
// schemas for a rolling upgrade (schema diff), draws the machines as state
// diagrams in Graphviz DOT, SVG or Mermaid (schema graph), runs the conformance suite
// (conformance), prints the classification table of the embedded jobs
// schema or of any schema directory (table) and scaffolds a new control-plane
// project in its own module (init, templates in internal/scaffold). It is
// built on cobra like writd and writctl: `writ help`, `writ CMD --help` and
// `writ completion bash|zsh|fish|powershell`.
//
// Run from the repository root, every command defaults to the reference
// schema in examples/jobs/schema and its generated package
// examples/jobs/jobsgen.
package main
