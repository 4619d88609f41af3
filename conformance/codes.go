package conformance

// Stable finding codes of the suite's own checks. Schema findings keep the
// codes of package ir (WRIT_UNCLASSIFIED_TYPE, WRIT_GUARD_UNKNOWN_STATE,
// ...). Tests, docs and tooling refer to these; never rename one.
const (
	// CodeCheckCrashed: a check panicked (a defect in the component under
	// test or in the suite).
	CodeCheckCrashed = "WRIT_CHECK_CRASHED"

	// CodeTableMissingType: a declared type is absent from the generated
	// classification table.
	CodeTableMissingType = "WRIT_TABLE_MISSING_TYPE"
	// CodeTableExtraType: the generated table has a type the schema does
	// not declare.
	CodeTableExtraType = "WRIT_TABLE_EXTRA_TYPE"
	// CodeTableMismatch: the generated table disagrees with the schema on a
	// type's class, number or machine, or on a machine's states.
	CodeTableMismatch = "WRIT_TABLE_MISMATCH"
	// CodeGenStale: generated code differs from what the schema generates.
	CodeGenStale = "WRIT_GEN_STALE"
	// CodeGenMissing: no generated code was found for the schema.
	CodeGenMissing = "WRIT_GEN_MISSING"

	// CodePluginFingerprint: the plugin was built against another schema.
	CodePluginFingerprint = "WRIT_PLUGIN_FINGERPRINT"
	// CodePluginMissingType: a type that needs evaluation is not served.
	CodePluginMissingType = "WRIT_PLUGIN_MISSING_TYPE"
	// CodePluginExtraType: the plugin serves a type that is not evaluated.
	CodePluginExtraType = "WRIT_PLUGIN_EXTRA_TYPE"
	// CodePluginRefused: the plugin failed to start or handshake.
	CodePluginRefused = "WRIT_PLUGIN_REFUSED"

	// CodeValidationDisagrees: generated validation and CUE disagree on a
	// payload.
	CodeValidationDisagrees = "WRIT_VALIDATION_DISAGREES"
	// CodeEvalImpure: evaluating the same item twice gave different results.
	CodeEvalImpure = "WRIT_EVAL_IMPURE"
	// CodeEvalFailed: the plugin failed on a valid item (internal error).
	CodeEvalFailed = "WRIT_EVAL_FAILED"
	// CodeApplyFailed: the replicated state machine could not apply a
	// committed entry (an error or a panic on the apply path).
	CodeApplyFailed = "WRIT_APPLY_FAILED"
	// CodeApplyNotIdempotent: applying a command twice differs from once.
	CodeApplyNotIdempotent = "WRIT_APPLY_NOT_IDEMPOTENT"
	// CodeTerminalLeft: a guard let an instance leave a terminal state.
	CodeTerminalLeft = "WRIT_TERMINAL_LEFT"
	// CodeSequenceDiverges: a fact sequence with duplicates, reorderings or
	// replays ended in another state than its deduplicated ordered form.
	CodeSequenceDiverges = "WRIT_SEQUENCE_DIVERGES"
	// CodeRegressionNotQuarantined: an illegal fact transition was not
	// turned into a conflict case.
	CodeRegressionNotQuarantined = "WRIT_REGRESSION_NOT_QUARANTINED"
	// CodeReplyBeforeCommit: a requester saw success before commit.
	CodeReplyBeforeCommit = "WRIT_REPLY_BEFORE_COMMIT"
	// CodeFactAckBeforeDurable: a fact was acknowledged before it was
	// durable in the outbox.
	CodeFactAckBeforeDurable = "WRIT_FACT_ACK_BEFORE_DURABLE"

	// CodeClusterScenario: a cluster scenario observed a contract violation.
	CodeClusterScenario = "WRIT_CLUSTER_SCENARIO"
)
