// Package conformance is writ's black-box conformance suite: it proves the
// contract W1–W10 (docs/conformance.md) for a given schema and handler
// plugin, and prints deterministic finding codes. `writ conformance` is a
// thin wrapper around Main; Go tests call Run.
//
// Checks are registered with stable IDs in three tiers:
//
//  1. static: the schema loads, every type is classified with a known
//     class, the generated classification table covers exactly the
//     declared types, generated code is fresh, guards name declared
//     states, terminal states have no exits, every fact has an
//     idempotency key, and the plugin (started through plugins/host, as a
//     node starts it) serves exactly the evaluated types for the same
//     schema fingerprint;
//  2. property: cases drawn from the schema (valid and invalid) run
//     through generated validation and CUE, through the real plugin twice,
//     through apply twice, and as random fact sequences through the
//     pipeline's guards;
//  3. cluster: scenarios against real writd processes.
//
// Each check maps to the invariants it proves (InvariantMap, `--list`).
// A check reports PASS only for what it verified; a check that could not
// run (missing plugin, generated code not linked, harness not available)
// reports NOT_RUN with the reason, and a selected NOT_RUN check makes the
// run exit 1 just like a FAIL. Findings carry a stable code and a status
// (BLOCKED, INCOMPLETE, REVIEW_REQUIRED); BLOCKED and INCOMPLETE fail their
// check.
//
// The suite never imports raftstore or membership: it sees the cluster only
// through writd processes and the client API.
package conformance
