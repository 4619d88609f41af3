// Package pipeline owns writ's staged write path: classification dispatch,
// validation, per-key latches, evaluation through the domain handlers, the
// runtime guards, batching into the replicated log, the commit barrier, the
// reply registry, the durable fact outbox, conflict cases, configuration
// changes and the watch stream of committed outcomes.
//
// Every operation goes through the same stages:
//
//	validate → evaluate under key latches → guard → append → barrier → reply
//
// and its class (from the generated catalog) decides how each stage behaves:
//
//  1. request (Submit): the reply comes only after the entry is committed and
//     applied on this node (W1). Outcomes: COMMITTED, REJECTED (validation or
//     guard; definitely not appended), UNAVAILABLE (no leader, handler down;
//     definitely not applied), UNCERTAIN (appended but not confirmed within
//     the commit timeout; provisional effect rolled back, outcome queryable by
//     request ID, retry with the same ID safe) (W2).
//  2. fact (Report): acknowledged as received only after an fsync into the
//     outbox; proposed and re-proposed with backoff and no timeout until
//     committed, with or without a leader, across restarts (W3). A leader
//     (re)appearing or a term change releases every retained fact at once
//     (backoffs reset, unconfirmed proposals proposed again); a failed
//     revision precondition re-evaluates a fact at once.
//  3. receipt (Deliver): acknowledged as received; each item goes through its
//     own class and its outcome appears on the watch stream only (W4).
//  4. config (ConfigUpgrade): stage → activate, or abort on timeout; first in
//     the log wins; COMMITTED only after activation applied; the reload hook
//     runs only after activation (W5).
//
// Where each stage and class lives (the hand-off types in parentheses):
//
//	stage1_ingress.go   validate: size, type, class, decoding, ID (validated)
//	class_request.go    Submit: a request enters the queue, waits for its reply
//	class_fact.go       Report: outbox fsync, then queue; leader-change release;
//	                    retiring a committed fact (outbox.go: the outbox itself,
//	                    outbox_fail.go: its write or fsync failing)
//	class_receipt.go    Deliver: each item through its own class; item timeouts
//	class_config.go     ConfigUpgrade: stage/activate/abort phases (reload.go:
//	                    the reload hook)
//	entry.go            the entry every stage moves, and the evaluate →
//	                    propose hand-off (evaluation: plan, command, outcome)
//	stage2_evaluate.go  Flush: key latches, the steps before the handler, one
//	                    Evaluator call for the batch
//	stage2_effect.go    a handler result → the command carrying its effect and
//	                    guard (guard*.go, decision.go: the runtime guard)
//	stage3_propose.go   one Propose per flush (proposedBatch), then every entry
//	                    handed on by its plan
//	stage4_barrier.go   waiting for the apply: Applied, await, timeouts (Tick),
//	                    retries, conflicts, UNCERTAIN (fence.go: fences)
//	stage5_reply.go     the reply: Handle, finishLocked (W1 check)
//	outcome*.go, watch*.go  outcomes by ID, and the watch stream
//
// docs/architecture.md follows one request and one fact through these files
// and the packages around the pipeline.
//
// A declared type without a class panics at ingress under the `strict` build
// tag (or Config.Strict) and is otherwise logged and handled as a fact (W6).
//
// The caller's duties when wiring a node:
//
//  1. Build the Pipeline with New (catalog, evaluator, data dir for the
//     outbox).
//  2. Hand the log Pipeline.Checker() as its kv.Checker and the Pipeline
//     itself as its kv.ApplyObserver, then SetLog (or pass Config.Log).
//  3. Start the Pipeline; Stop it before closing the log.
//  4. Stop the node when OutboxFailed is closed (W10).
//
// Deterministic rejection versus failure: the apply-time Checker (W8) re-runs
// every guard carried in kv.Command.Guard against the replica's committed
// state; a disagreement vetoes the command identically on every replica
// (kv.StatusRejected). A failed revision precondition is a recorded no-op
// (kv.StatusConflict) and the proposer re-evaluates (W7). Neither is a crash.
// Only an outbox write or fsync error is fatal (W10): it is never
// acknowledged, the outbox refuses every later fact, the failure is logged
// once at ERROR, and OutboxFailed is closed so that the node stops, as on a
// WAL failure, and recovers from disk. A fact whose record may have reached
// the file is answered UNCERTAIN (the restarted node reloads and commits
// it); only a fact refused before anything of it was written is UNAVAILABLE
// (W2; outbox_fail.go).
//
// Machine records `_m/<machine>/<instance>` ({"state","order"}) are owned by
// the pipeline: it hands them to handlers in EvalItem.State and writes them
// itself with a CAS on their revision. Conflict cases live at
// `_conflict/<machine>/<instance>`, configuration at `_config/`.
//
// The package imports only the standard library, kv, schema/ir and
// internal/backoff (retry delays with jitter; itself stdlib-only).
package pipeline
