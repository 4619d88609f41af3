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
//     through generated validation and CUE (the oracle, via schema/load),
//     as random fact sequences through the pipeline's guard, and as
//     workloads through the real pipeline with the user's real plugin
//     over pipelinetest's in-memory log with manual commit (purity,
//     apply-twice, perturbed sequences, conflict cases, reply-after-commit,
//     fact acknowledgement backed by the outbox file);
//  3. cluster: scenarios against an ephemeral cluster of 3 real writd
//     processes (built with `go build` unless given), each with the user's
//     plugin: quorum loss, SIGKILL of the leader or of a fact's receiver,
//     commit timeout, receipts and watch, configuration with a majority
//     down.
//
// Each check maps to the invariants it proves (InvariantMap, `--list`).
// A check reports PASS only for what it verified; a check that could not
// run (missing plugin, generated code not linked, harness not available)
// reports NOT_RUN with the reason, and a selected NOT_RUN check makes the
// run exit 1 just like a FAIL. Findings carry a stable code and a status
// (BLOCKED, INCOMPLETE, REVIEW_REQUIRED); BLOCKED and INCOMPLETE fail their
// check.
//
// The suite's own tests prove each contract check can fail: build tags
// (canary_replybeforecommit, canary_ackbeforefsync,
// canary_guardterminalexit in the pipeline; canary_tablemissingtype here)
// compile a deliberate bug into the code, and the tests build the suite with
// each tag and assert the matching check fails. Never build a node with them.
//
// The suite never imports raftstore or membership: it sees the cluster only
// through writd processes and the client API.
package conformance
