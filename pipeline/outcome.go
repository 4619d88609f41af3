package pipeline

//go:generate go tool stringer -type=Status,Verdict -linecomment -output outcome_string_gen.go

import (
	"errors"
	"fmt"

	"github.com/writ-dev/writ/schema/ir"
)

// Status is what a requester learns about a request-shaped operation (W2).
type Status uint8

const (
	// StatusCommitted: every entry the operation produced is committed by a
	// majority and applied on this node.
	StatusCommitted Status = 1 // COMMITTED
	// StatusRejected: validation or a guard refused the operation; it was
	// definitely not appended (or appended only as a recorded no-op).
	StatusRejected Status = 2 // REJECTED
	// StatusUnavailable: not ready, no leader or handler down; definitely
	// not applied. Safe to retry.
	StatusUnavailable Status = 3 // UNAVAILABLE
	// StatusUncertain: appended but not confirmed within the commit timeout.
	// Provisional state was rolled back; the entry may still commit. Query
	// OutcomeOf with the request ID, or retry with the same request ID.
	StatusUncertain Status = 4 // UNCERTAIN
	// StatusNotCommitted: definitely not committed, for good: the request
	// ID was fenced in the log (fence.go) before any attempt with it
	// applied, so no attempt with that ID can ever commit. Submit the
	// operation again with a new request ID.
	StatusNotCommitted Status = 5 // NOT_COMMITTED
)

// Verdict is the guard's decision for a machine transition (W8). It travels
// in kv.Command.Verdict.
type Verdict uint8

const (
	// VerdictNone: the entry drives no machine.
	VerdictNone Verdict = 0 // none
	// VerdictApply: a declared transition (or creation in an initial state).
	VerdictApply Verdict = 1 // apply
	// VerdictDuplicate: already in the target state, or the sequence was
	// already seen with this state; state unchanged, recorded.
	VerdictDuplicate Verdict = 2 // duplicate
	// VerdictStale: an older sequence than the recorded one; ignored,
	// recorded.
	VerdictStale Verdict = 3 // stale
	// VerdictReject: an illegal transition requested by a request; the
	// request is REJECTED.
	VerdictReject Verdict = 4 // reject
	// VerdictQuarantine: an illegal transition reported by a fact; state is
	// preserved and a conflict case is opened.
	VerdictQuarantine Verdict = 5 // quarantine
	// VerdictOverride: an operator's conflict resolve with apply-incoming
	// moves the instance to the retained incoming fact's state although
	// the machine does not declare the step; only a writ.conflict.resolve
	// command may carry it, and the case records it (audited).
	VerdictOverride Verdict = 6 // override
)

// Outcome is the answer to a request (Submit, ConfigUpgrade, OutcomeOf).
type Outcome struct {
	// ID is the request ID the caller chose.
	ID     string
	Type   string
	Status Status
	// Index is the log index of the committed entry (for a duplicate
	// request ID, the index of the first application).
	Index uint64
	// Result is the handler's result document (COMMITTED only, when this
	// node evaluated the entry).
	Result []byte
	// Verdict is the guard decision for the entry's own transition.
	Verdict Verdict
	// Duplicate is set when the request ID had already been applied.
	Duplicate bool
	// Reason explains any status other than COMMITTED; Field and Rule name
	// the offending payload field and constraint when there is one.
	Reason string
	Field  string
	Rule   string
}

func (o Outcome) String() string {
	s := o.Status.String()
	if o.Index != 0 {
		s += fmt.Sprintf(" index=%d", o.Index)
	}
	if o.Verdict != VerdictNone {
		s += " verdict=" + o.Verdict.String()
	}
	if o.Duplicate {
		s += " duplicate"
	}
	if o.Field != "" {
		s += fmt.Sprintf(" field=%s rule=%s", o.Field, o.Rule)
	}
	if o.Reason != "" {
		s += fmt.Sprintf(" reason=%q", o.Reason)
	}
	return s
}

// Ack acknowledges a fact (Report) or a receipt (Deliver). It never carries
// an outcome of the work it acknowledges (W3, W4): Received means only that
// the node has it (for facts: fsync'd in the outbox).
type Ack struct {
	Received bool
	// ID is the fact ID or receipt ID.
	ID string
	// ItemIDs are the command IDs of a receipt's items, to correlate with
	// the watch stream.
	ItemIDs []string
	// When Received is false: REJECTED (bad input) or UNAVAILABLE (the
	// outbox cannot accept), with the reason and offending field.
	Status Status
	Reason string
	Field  string
	Rule   string
	// Overloaded: UNAVAILABLE because the outbox is at a bound (admission
	// control); nothing was written, the reporter retries later.
	Overloaded bool
}

// Format is the encoding of an ingress payload.
type Format uint8

const (
	// FormatJSON: the payload is a JSON document.
	FormatJSON Format = 0
	// FormatBinary: the payload is the generated stable binary encoding.
	FormatBinary Format = 1
)

// Entry is one operation handed to the pipeline at ingress.
type Entry struct {
	// Type is the declared entry type, e.g. "job.submit".
	Type string
	// ID is the request ID (requests, config), the receipt ID (receipts) or
	// the fact ID (facts). When empty, the payload's declared idempotency
	// field is used; if that is empty too the entry is REJECTED.
	ID      string
	Format  Format
	Payload []byte
}

var (
	// ErrCompacted: a watch asked for events older than the ring and the
	// log retain. Watch returns it as a *CompactedError naming the first
	// index still available.
	ErrCompacted = errors.New("pipeline: compacted: re-list state and watch from the current index")
	// ErrStopped: the pipeline was stopped.
	ErrStopped = errors.New("pipeline: stopped")
	// ErrOutboxFailed: the outbox hit a write or fsync error; the node must
	// stop and recover from disk (W10). Alone, it refuses facts nothing of
	// which was written.
	ErrOutboxFailed = errors.New("pipeline: outbox failed")
	// ErrOutboxUncertain: the outbox failed after a fact's record was
	// written (at least in part) and before its fsync succeeded. The fact
	// is not acknowledged, but the record may be in the file, and the
	// restarted node reloads and commits it: its outcome is UNCERTAIN.
	ErrOutboxUncertain = errors.New("pipeline: fact not acknowledged, its outbox record may be on disk")
)

func rejectField(fe *ir.FieldError) Outcome {
	return Outcome{Type: fe.Type, Status: StatusRejected, Reason: fe.Error(), Field: fe.Field, Rule: fe.Rule}
}

func ptrTo[T any](v T) *T { return &v }
