package pluginproto

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The batch codec packs a whole batch into the single bytes field of
// EvaluateRequest and EvaluateResponse. Strings and byte strings are a
// uvarint length followed by the bytes; counts and revisions are uvarints.
//
// Request (EvaluateRequest.items):
//
//	count                       number of items
//	item × count:
//	  type, id                  strings
//	  payload                   bytes (JSON)
//	  nstate                    count
//	  record × nstate:
//	    key                     string
//	    value                   bytes
//	    rev                     uvarint (0: absent)
//
// Response (EvaluateResponse.results), one result per item, positionally:
//
//	count                       number of results
//	result × count: a tag byte, then
//	  TagEffect:
//	    nwrites                 count
//	    write × nwrites:
//	      key                   string
//	      flags                 byte (FlagDelete)
//	      value                 bytes
//	      if_rev                uvarint (0: the key must be absent)
//	    result                  bytes (optional result document, may be empty)
//	    ntransitions            count
//	    transition × n:
//	      machine, key, to      strings
//	  TagNeedKeys:
//	    nkeys                   count
//	    key × nkeys             string
//	  TagError:
//	    kind                    byte (ErrorRule, ErrorValidation, ErrorInternal)
//	    message                 string

// Result tags.
const (
	// TagEffect: writes, an optional result document and transitions.
	TagEffect byte = 0
	// TagNeedKeys: the handler needs keys it was not given.
	TagNeedKeys byte = 1
	// TagError: a typed error.
	TagError byte = 2
)

// Error kinds of a TagError result.
const (
	// ErrorRule: a domain rule refused the entry.
	ErrorRule byte = 1
	// ErrorValidation: the payload is invalid.
	ErrorValidation byte = 2
	// ErrorInternal: the handler failed (panic, bug, malformed output).
	ErrorInternal byte = 3
)

// FlagDelete marks a write as a delete.
const FlagDelete byte = 1

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("pluginproto: malformed batch")

// AppendUvarint appends v as a uvarint.
func AppendUvarint(dst []byte, v uint64) []byte { return binary.AppendUvarint(dst, v) }

// AppendString appends a length-prefixed string.
func AppendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// AppendBytes appends a length-prefixed byte string.
func AppendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// AppendItem appends an item's header; nstate records must follow.
func AppendItem(dst []byte, typ, id string, payload []byte, nstate int) []byte {
	dst = AppendString(dst, typ)
	dst = AppendString(dst, id)
	dst = AppendBytes(dst, payload)
	return binary.AppendUvarint(dst, uint64(nstate))
}

// AppendRecord appends one state record.
func AppendRecord(dst []byte, key string, value []byte, rev uint64) []byte {
	dst = AppendString(dst, key)
	dst = AppendBytes(dst, value)
	return binary.AppendUvarint(dst, rev)
}

// AppendWrite appends one write of a TagEffect result.
func AppendWrite(dst []byte, key string, value []byte, del bool, ifRev uint64) []byte {
	dst = AppendString(dst, key)
	var flags byte
	if del {
		flags = FlagDelete
	}
	dst = append(dst, flags)
	dst = AppendBytes(dst, value)
	return binary.AppendUvarint(dst, ifRev)
}

// AppendTransition appends one transition of a TagEffect result.
func AppendTransition(dst []byte, machine, key, to string) []byte {
	dst = AppendString(dst, machine)
	dst = AppendString(dst, key)
	return AppendString(dst, to)
}

// AppendError appends a whole TagError result.
func AppendError(dst []byte, kind byte, msg string) []byte {
	dst = append(dst, TagError, kind)
	return AppendString(dst, msg)
}

// Decoder reads a packed request or response. The first malformed field
// stops it: every later read returns zero values and Err reports the field.
type Decoder struct {
	b   []byte
	s   string // the same bytes as b, when strings are shared
	off int
	err error
}

// NewDecoder reads b. With shareStrings, the strings it returns are
// substrings of one copy of b made here (one allocation for all of them);
// otherwise each String call allocates. The byte strings it returns alias
// b either way.
func NewDecoder(b []byte, shareStrings bool) *Decoder {
	d := &Decoder{b: b}
	if shareStrings {
		d.s = string(b)
	}
	return d
}

// Err is the first decoding error, wrapping ErrMalformed.
func (d *Decoder) Err() error { return d.err }

// Done reports an error unless every byte was read without error.
func (d *Decoder) Done() error {
	if d.err == nil && d.off != len(d.b) {
		d.err = fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(d.b)-d.off)
	}
	return d.err
}

func (d *Decoder) fail(field string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s at offset %d is truncated or invalid", ErrMalformed, field, d.off)
	}
}

// Invalid records that field holds a value the reader cannot interpret
// (e.g. an unknown tag), unless an error was already recorded. Reading
// stops there.
func (d *Decoder) Invalid(field string) { d.fail(field) }

// Byte reads one byte.
func (d *Decoder) Byte(field string) byte {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.b) {
		d.fail(field)
		return 0
	}
	c := d.b[d.off]
	d.off++
	return c
}

// Uvarint reads a uvarint.
func (d *Decoder) Uvarint(field string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.fail(field)
		return 0
	}
	d.off += n
	return v
}

// Count reads a count of elements that each take at least minSize bytes,
// refusing one the remaining input cannot hold (so a corrupt count cannot
// make the caller allocate without bound).
func (d *Decoder) Count(field string, minSize int) int {
	v := d.Uvarint(field)
	if d.err != nil {
		return 0
	}
	if v > uint64(len(d.b)-d.off)/uint64(max(minSize, 1)) {
		d.fail(field)
		return 0
	}
	return int(v)
}

func (d *Decoder) span(field string) (int, int) {
	n := d.Uvarint(field)
	if d.err != nil {
		return 0, 0
	}
	if n > uint64(len(d.b)-d.off) {
		d.fail(field)
		return 0, 0
	}
	lo := d.off
	d.off += int(n)
	return lo, d.off
}

// Bytes reads a length-prefixed byte string; it aliases the input (nil when
// empty).
func (d *Decoder) Bytes(field string) []byte {
	lo, hi := d.span(field)
	if lo == hi {
		return nil
	}
	return d.b[lo:hi:hi]
}

// String reads a length-prefixed string.
func (d *Decoder) String(field string) string {
	lo, hi := d.span(field)
	if lo == hi {
		return ""
	}
	if d.s != "" {
		return d.s[lo:hi]
	}
	return string(d.b[lo:hi])
}

// Minimum encoded sizes, for Count.
const (
	// MinItem is the smallest encoded item (empty type, id and payload, no
	// state).
	MinItem = 4
	// MinRecord is the smallest encoded record.
	MinRecord = 3
	// MinResult is the smallest encoded result: an error with an empty
	// message, or a request for one empty key (three bytes; an effect
	// with nothing takes four).
	MinResult = 3
	// MinWrite is the smallest encoded write.
	MinWrite = 4
	// MinTransition is the smallest encoded transition.
	MinTransition = 3
	// MinString is the smallest encoded string.
	MinString = 1
)
