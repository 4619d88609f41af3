// Package ir owns the validated plain-Go model of a writ schema (entry types,
// classes, machines, payload fields and constraints), its stable
// fingerprint, and the small runtime vocabulary (Class, Payload, TypeDesc,
// Catalog) that generated code implements. It imports neither
// cuelang.org/go nor any runtime package of the module.
//
// Besides the model it holds the checks that need no CUE:
//
//   - Schema.Check: semantic findings (unclassified types, guards naming
//     unknown states, terminal states with exits, unreachable states, facts
//     without an idempotency key, duplicate type numbers, bad routing
//     fields), each with a stable code, a status and a fix;
//   - Schema.Fingerprint: "sha256:<hex>" over the normalized model
//     (positions and docs excluded), carried in serf tags and the plugin
//     handshake;
//   - Diff: which changes between two schemas a rolling upgrade survives.
package ir
