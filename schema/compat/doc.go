// Package compat decides whether nodes running two schemas can share one
// cluster during a rolling upgrade. It is the one rule behind
// `writ schema diff` and writd's admission of a node whose schema differs
// from the cluster's:
//
//   - Check(active, candidate) runs ir.Diff and refuses the candidate when
//     any finding is BLOCKED (the error names the code and the fix);
//   - Effective(schemas...) is what a mixed cluster may use: the entry
//     types (and machine states) every one of the schemas declares;
//   - Encode/Decode carry a schema's model between nodes, checked against
//     its fingerprint.
//
// It depends on schema/ir only (no CUE, no network), so writ, writd and
// programs embedding a node can all use it.
package compat
