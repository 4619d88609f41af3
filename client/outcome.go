package client

//go:generate go tool stringer -type=Status -linecomment -output status_string_gen.go

import (
	"errors"
	"fmt"

	"github.com/writ-dev/writ/api/writv1"
)

// Status is what a requester learns about a request (W2).
type Status int

const (
	// Uncertain: the request may have been appended and may still commit.
	// Look its ID up with Client.Outcome, or retry with the same ID. A
	// status the client does not know is reported as Uncertain too.
	Uncertain Status = iota // UNCERTAIN
	// Committed: committed by a majority and applied.
	Committed // COMMITTED
	// Rejected: refused by validation or a guard; definitely not appended.
	Rejected // REJECTED
	// Unavailable: not ready, no leader, overloaded, or no endpoint could
	// be reached before the request left the client; definitely not
	// appended, safe to retry.
	Unavailable // UNAVAILABLE
	// NotCommitted: was not committed within its commit timeout, and the
	// cluster made that final: it never will be.
	NotCommitted // NOT_COMMITTED
)

// Definite reports whether the status is final for the request: only
// Uncertain is not.
func (s Status) Definite() bool { return s != Uncertain }

// statusOf maps the wire enum to a Status by name, so a value added to the
// API later (such as NOT_COMMITTED) maps without a regenerated client, and
// one this client does not know is Uncertain ("look it up by ID").
func statusOf(o writv1.Outcome) Status {
	switch o.String() {
	case "COMMITTED":
		return Committed
	case "REJECTED":
		return Rejected
	case "UNAVAILABLE":
		return Unavailable
	case "NOT_COMMITTED":
		return NotCommitted
	}
	return Uncertain
}

// Outcome is the typed answer to a request-shaped call.
type Outcome struct {
	Status Status
	// Wire is the outcome as the server named it (OUTCOME_UNSPECIFIED when
	// the answer never came).
	Wire writv1.Outcome
	// RequestID is the ID the request was sent with (always set).
	RequestID string
	// Index is the log index it committed at (Committed only).
	Index uint64
	// Result is the handler's result (Committed only).
	Result []byte
	// Reason explains a status other than Committed.
	Reason string
	// Field names the payload field that failed validation (Rejected).
	Field string
	// ServedBy is the node that produced a Committed reply.
	ServedBy string
	// Endpoint is the endpoint that gave the answer, or the last one tried.
	Endpoint string
	// Attempts is how many endpoints the request was sent to or tried.
	Attempts int
	// Known is false for a lookup that found no recorded outcome.
	Known bool
	// ApplyStatus is a lookup's apply status (applied, duplicate, ...).
	ApplyStatus string
}

// OutcomeError is the error of a call whose outcome is not Committed.
type OutcomeError struct {
	Outcome Outcome
	// Err is the last attempt's error (a gRPC status), if any.
	Err error
}

// Unwrap returns the last attempt's error.
func (e *OutcomeError) Unwrap() error { return e.Err }

func (e *OutcomeError) Error() string {
	o := e.Outcome
	msg := fmt.Sprintf("client: %s %s", o.Status, o.RequestID)
	if o.Reason != "" {
		msg += ": " + o.Reason
	}
	return msg
}

// OutcomeOf returns the Outcome carried by err (an *OutcomeError).
func OutcomeOf(err error) (Outcome, bool) {
	var oe *OutcomeError
	if errors.As(err, &oe) {
		return oe.Outcome, true
	}
	return Outcome{}, false
}

// detail extracts the writ outcome detail a server attaches to its errors.
func detail(err error) (*writv1.OutcomeDetail, bool) { return writv1.OutcomeFromError(err) }

// fromDetail is the Outcome a server's error detail states.
func fromDetail(d *writv1.OutcomeDetail, id string) Outcome {
	o := Outcome{Status: statusOf(d.Outcome), Wire: d.Outcome, RequestID: d.RequestId, Reason: d.Reason, Field: d.Field, Index: d.Index, Known: true}
	if o.RequestID == "" {
		o.RequestID = id
	}
	return o
}
