package wire

import (
	"fmt"
	"strconv"

	"github.com/writ-dev/writ/schema/ir"
	"github.com/writ-dev/writ/schema/jsonscan"
)

func fieldErr(field, rule, msg string) *ir.FieldError {
	return &ir.FieldError{Field: field, Rule: rule, Msg: msg}
}

// Member is the path step of the member name: ".name". The name is taken
// verbatim, so an unknown key "" or "[0]" nested in spec reads "spec." or
// "spec.[0]".
func Member(name string) string { return "." + name }

// Index is the path step of element i of a list: "[i]".
func Index(i int) string { return "[" + strconv.Itoa(i) + "]" }

// Under places fe, whose path is relative to a value, under the path step
// that leads to that value, and returns it.
func Under(step string, fe *ir.FieldError) *ir.FieldError {
	fe.Field = step + fe.Field
	return fe
}

// Root finishes fe, whose path is relative to a payload of entry type typ:
// it stamps the type and drops the path's leading dot.
func Root(typ string, fe *ir.FieldError) *ir.FieldError {
	fe.Type = typ
	if len(fe.Field) > 0 && fe.Field[0] == '.' {
		fe.Field = fe.Field[1:]
	}
	return fe
}

// WrongType is the error of a JSON value of another kind than want.
func WrongType(want string, val []byte) *ir.FieldError {
	return fieldErr("", want, "must be "+want+", not "+jsonscan.Kind(val)+" (fix: send "+want+")")
}

// UnknownField is the error of a member key that names no declared field;
// known lists the declared ones ("a, b, c").
func UnknownField(key, known string) *ir.FieldError {
	return fieldErr(Member(key), "closed struct", "is not a declared field (fix: remove it; known fields: "+known+")")
}

// DuplicateField is the error of a member key that appears twice.
func DuplicateField(key string) *ir.FieldError {
	return fieldErr(Member(key), "unique keys", "appears more than once (fix: send each field once)")
}

// MissingField is the error of a required field that is absent.
func MissingField(name string) *ir.FieldError {
	return fieldErr(Member(name), "required", "is required (fix: add the field)")
}

// Invalid is the error of a value that breaks a declared constraint: the
// field at path (from the payload's root) of a payload of type typ breaks
// rule.
func Invalid(typ, path, rule, msg string) *ir.FieldError {
	return &ir.FieldError{Type: typ, Field: path, Rule: rule, Msg: msg}
}

// Nest re-roots err, the validation error of a receipt's item, under the
// item's path in a payload of type typ.
func Nest(typ, path string, err error) error {
	if fe, ok := err.(*ir.FieldError); ok {
		field := fe.Field
		if path != "" {
			field = path + "." + fe.Field
		}
		return &ir.FieldError{Type: typ, Field: field, Rule: fe.Rule, Msg: fe.Msg}
	}
	return fmt.Errorf("%s: %s: %w", typ, path, err)
}

// Quote quotes a value for an error message, cut after 64 bytes.
func Quote(s string) string {
	if len(s) > 64 {
		return fmt.Sprintf("%q…", s[:64])
	}
	return fmt.Sprintf("%q", s)
}
