package sdk

//go:generate go tool stringer -type=ErrorKind -linecomment -output errorkind_string_gen.go

import (
	"errors"
	"fmt"
)

// ErrorKind classifies a handler failure for one item.
type ErrorKind uint8

const (
	// KindRule: a domain rule refused the entry (the requester gets REJECTED).
	KindRule ErrorKind = 1 // rule
	// KindValidation: the payload is invalid (REJECTED).
	KindValidation ErrorKind = 2 // validation
	// KindInternal: the handler failed (panic, bug, malformed output).
	KindInternal ErrorKind = 3 // internal
)

// Error is a typed failure of one item.
type Error struct {
	Kind ErrorKind
	Msg  string
}

func (e *Error) Error() string { return e.Kind.String() + ": " + e.Msg }

// Rule returns a domain-rule refusal, e.g. Rule("queue %q is paused; resume it first", q).
func Rule(format string, args ...any) *Error {
	return &Error{Kind: KindRule, Msg: fmt.Sprintf(format, args...)}
}

// Invalid returns a validation error naming the payload field and the fix.
func Invalid(field, format string, args ...any) *Error {
	return &Error{Kind: KindValidation, Msg: fmt.Sprintf("field %q: ", field) + fmt.Sprintf(format, args...)}
}

// Internal returns an internal error (a handler bug or impossible state).
func Internal(format string, args ...any) *Error {
	return &Error{Kind: KindInternal, Msg: fmt.Sprintf(format, args...)}
}

// asError maps any handler error to a typed *Error: *Error values keep their
// kind, everything else is internal.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Kind: KindInternal, Msg: err.Error()}
}
