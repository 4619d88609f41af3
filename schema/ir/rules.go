package ir

import (
	"fmt"
	"iter"
	"math"
	"strconv"
	"strings"
)

// The texts below are the Rule a field check names in its error, in CUE
// syntax. writ gen emits them into the generated validators and the runtime
// catalog builds them when it compiles a schema, so a refusal reads the same
// under either catalog.

// Op is the CUE operator of a bound: the lower one (>, >=) or the upper one
// (<, <=).
func (b *Bound) Op(lower bool) string {
	switch {
	case lower && b.Exclusive:
		return ">"
	case lower:
		return ">="
	case b.Exclusive:
		return "<"
	}
	return "<="
}

// Bounds yields the field's numeric bounds that are set, the lower one
// (lower true) first.
func (f *Field) Bounds() iter.Seq2[*Bound, bool] {
	return func(yield func(*Bound, bool) bool) {
		if f.Min != nil && !yield(f.Min, true) {
			return
		}
		if f.Max != nil {
			yield(f.Max, false)
		}
	}
}

// EnumRule is an enumeration as CUE writes it: "a" | "b".
func EnumRule(values []string) string {
	q := make([]string, len(values))
	for i, s := range values {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, " | ")
}

// LenRule is the field's length bounds as CUE writes them, with the
// built-in package pkg and the quantity what: strings.MinRunes(1) &
// strings.MaxRunes(64), list.MinItems(1).
func (f *Field) LenRule(pkg, what string) string {
	var parts []string
	if f.MinLen != nil {
		parts = append(parts, fmt.Sprintf("%s.Min%s(%d)", pkg, what, *f.MinLen))
	}
	if f.MaxLen != nil {
		parts = append(parts, fmt.Sprintf("%s.Max%s(%d)", pkg, what, *f.MaxLen))
	}
	return strings.Join(parts, " & ")
}

// LenRange is the field's length bounds as a closed range: -1 and
// math.MaxInt where a bound is not set.
func (f *Field) LenRange() (lo, hi int) {
	lo, hi = -1, math.MaxInt
	if f.MinLen != nil {
		lo = *f.MinLen
	}
	if f.MaxLen != nil {
		hi = *f.MaxLen
	}
	return lo, hi
}

// LenDesc is the field's length bounds in words: "1 to 64", "at least 1",
// "at most 64".
func (f *Field) LenDesc() string {
	switch {
	case f.MinLen != nil && f.MaxLen != nil:
		return fmt.Sprintf("%d to %d", *f.MinLen, *f.MaxLen)
	case f.MinLen != nil:
		return fmt.Sprintf("at least %d", *f.MinLen)
	}
	return fmt.Sprintf("at most %d", *f.MaxLen)
}
