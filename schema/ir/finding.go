package ir

import (
	"fmt"
	"sort"
)

// Status is the severity of a finding.
type Status string

const (
	// StatusBlocked: the schema cannot be used; generation refuses it.
	StatusBlocked Status = "BLOCKED"
	// StatusIncomplete: something the contract needs is missing.
	StatusIncomplete Status = "INCOMPLETE"
	// StatusReviewRequired: legal, but a human should confirm it is intended.
	StatusReviewRequired Status = "REVIEW_REQUIRED"
)

// Stable finding codes. Tests, docs and tooling refer to them; never rename.
const (
	CodeCUEError              = "WRIT_CUE_ERROR"
	CodeSchemaInvalid         = "WRIT_SCHEMA_INVALID"
	CodeUnclassifiedType      = "WRIT_UNCLASSIFIED_TYPE"
	CodeUnknownClass          = "WRIT_UNKNOWN_CLASS"
	CodeGuardUnknownState     = "WRIT_GUARD_UNKNOWN_STATE"
	CodeUnreachableState      = "WRIT_UNREACHABLE_STATE"
	CodeTerminalHasExit       = "WRIT_TERMINAL_HAS_EXIT"
	CodeFactWithoutID         = "WRIT_FACT_WITHOUT_ID"
	CodeUnsupportedConstraint = "WRIT_UNSUPPORTED_CONSTRAINT"
	CodeDuplicateTypeNumber   = "WRIT_DUPLICATE_TYPE_NUMBER"
	CodeUnknownMachine        = "WRIT_UNKNOWN_MACHINE"
	CodeUnknownField          = "WRIT_UNKNOWN_FIELD"
	CodeBadFieldType          = "WRIT_BAD_FIELD_TYPE"
	CodeBadKeyTemplate        = "WRIT_BAD_KEY_TEMPLATE"
	CodeBadItems              = "WRIT_BAD_ITEMS"
	CodeNoTransition          = "WRIT_NO_TRANSITION"
	CodeNoCreator             = "WRIT_NO_CREATOR"
	CodeStateNotTargeted      = "WRIT_STATE_NOT_TARGETED"
	CodeOrderScopeUnused      = "WRIT_ORDER_SCOPE_UNUSED"
	CodeOrderScopeMixed       = "WRIT_ORDER_SCOPE_MIXED"
	CodeNoEpochOpener         = "WRIT_NO_EPOCH_OPENER"
)

// Finding is one deterministic static finding about a schema.
type Finding struct {
	Code    string `json:"code"`
	Status  Status `json:"status"`
	Pos     Pos    `json:"pos"`
	Subject string `json:"subject,omitempty"` // e.g. "entries.job.submit" or "machines.job"
	Msg     string `json:"message"`
	Fix     string `json:"fix"`
}

func (p Pos) String() string {
	if p.File == "" {
		return "-"
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

func (f Finding) String() string {
	return fmt.Sprintf("%s: %s %s: %s (fix: %s)", f.Pos, f.Status, f.Code, f.Msg, f.Fix)
}

// Fails reports whether the finding blocks generation (BLOCKED or INCOMPLETE).
func (f Finding) Fails() bool { return f.Status == StatusBlocked || f.Status == StatusIncomplete }

// AnyFails reports whether any finding blocks generation.
func AnyFails(fs []Finding) bool {
	for _, f := range fs {
		if f.Fails() {
			return true
		}
	}
	return false
}

// SortFindings orders findings by file, line, column, code and message so
// that output is deterministic.
func SortFindings(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		if a.Pos.File != b.Pos.File {
			return a.Pos.File < b.Pos.File
		}
		if a.Pos.Line != b.Pos.Line {
			return a.Pos.Line < b.Pos.Line
		}
		if a.Pos.Col != b.Pos.Col {
			return a.Pos.Col < b.Pos.Col
		}
		if a.Code != b.Code {
			return a.Code < b.Code
		}
		return a.Msg < b.Msg
	})
}
