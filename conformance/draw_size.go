package conformance

import (
	"strings"

	"github.com/writ-dev/writ/schema/ir"
)

// Sizes: every tier draws payloads across the whole range the schema
// allows, not only small ones. A bounded string is drawn at its maximum
// length (in runes, also with multi-byte runes, so that its byte size is the
// largest the schema allows) about one time in six, and at its minimum as
// often; a bounded list at its maximum number of items one time in six;
// numbers at their bounds (see integer and float). Small values stay the
// common case: they collide on keys and keep traces readable. A drawer with
// maxOut set draws every bounded string and list at its maximum (the
// pipeline workload uses it for a third of its cases, so that the largest
// payloads every type allows, in runes and in bytes, are committed and applied).

// maxMode makes a drawer draw every bounded string and list at its maximum
// size: maxNarrow with one-byte runes (the most runes), maxWide with
// multi-byte runes (the most bytes).
type maxMode int

const (
	maxOff maxMode = iota
	maxNarrow
	maxWide
)

// sizeEdge picks which edge of a length range a draw takes.
type sizeEdge int

const (
	edgeSmall   sizeEdge = iota // a short value (the common case)
	edgeMin                     // the minimum length
	edgeMax                     // the maximum length, one-byte runes
	edgeMaxWide                 // the maximum length, multi-byte runes
	edgeAny                     // uniform over the whole range
)

func (d *drawer) edge(bounded bool) sizeEdge {
	switch {
	case d.maxOut == maxNarrow && bounded:
		return edgeMax
	case d.maxOut == maxWide && bounded:
		return edgeMaxWide
	}
	switch k := d.rng.IntN(12); {
	case k == 0:
		return edgeMin
	case bounded && k == 1:
		return edgeMax
	case bounded && k == 2:
		return edgeMaxWide
	case bounded && k == 3:
		return edgeAny
	}
	return edgeSmall
}

// plainField draws a pattern-free string of lo..hi runes.
func (d *drawer) plainField(lo, hi int, bounded bool) string {
	if hi < lo {
		return d.plain(lo)
	}
	switch d.edge(bounded) {
	case edgeMin:
		return d.plain(lo)
	case edgeMax:
		return d.plain(hi)
	case edgeMaxWide:
		return d.wide(hi)
	case edgeAny:
		return d.plain(lo + d.rng.IntN(hi-lo+1))
	}
	return d.plain(lo + d.rng.IntN(min(hi, lo+16)-lo+1))
}

// wideRunes are multi-byte runes (2, 3 and 4 bytes in UTF-8).
var wideRunes = []rune("éßλжあ漢€𝄞😀")

// wide draws n multi-byte runes.
func (d *drawer) wide(n int) string {
	var b strings.Builder
	b.Grow(4 * n)
	for i := 0; i < n; i++ {
		b.WriteRune(wideRunes[d.rng.IntN(len(wideRunes))])
	}
	return b.String()
}

// listLen draws a list field's number of items.
func (d *drawer) listLen(f *ir.Field) int {
	lo, hi := 0, -1
	if f.MinLen != nil {
		lo = *f.MinLen
	}
	if f.MaxLen != nil {
		hi = *f.MaxLen
	}
	small := func() int {
		top := max(3, lo)
		if hi >= 0 {
			top = min(top, hi)
		}
		if top <= lo {
			return lo
		}
		return lo + d.rng.IntN(top-lo+1)
	}
	if hi < lo {
		if hi >= 0 {
			return lo // contradictory bounds: let the oracle decide
		}
		if d.rng.IntN(12) == 0 {
			return lo + 64 // unbounded: sometimes long
		}
		return small()
	}
	switch d.edge(true) {
	case edgeMin:
		return lo
	case edgeMax, edgeMaxWide:
		return hi
	case edgeAny:
		return lo + d.rng.IntN(hi-lo+1)
	}
	return small()
}
