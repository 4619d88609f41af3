package kv

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Batch encoding (the data of one replicated log entry).
//
// The encoding is stable and versioned: every replica, now and after an
// upgrade, must decode an old entry to the same commands. Version 1 is:
//
//	batch   = version:u8(=1) count:uvarint command*count
//	command = ID:str Type:str Class:u8 Key:str Verdict:u8 Guard:bytes
//	          nwrites:uvarint write*nwrites Payload:bytes Origin:str
//	write   = Key:str flags:u8 IfRev:uvarint Value:bytes
//	str     = bytes = len:uvarint byte*len
//	flags   = bit0 Delete | bit1 Unconditional (other bits must be zero)
//
// Every uvarint must be minimally encoded, and the whole input must be
// consumed, so a decodable input has exactly one encoding: re-encoding a
// decoded batch yields the same bytes. Empty byte strings decode as nil.
// The decoder never allocates more than the input could describe, and
// rejects malformed input with a *DecodeError naming the field.

// CodecVersion is the batch encoding version written by EncodeBatch.
const CodecVersion = 1

const (
	flagDelete        = 1 << 0
	flagUnconditional = 1 << 1
	flagsKnown        = flagDelete | flagUnconditional
)

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("kv: malformed batch")

// DecodeError reports where a batch failed to decode.
type DecodeError struct {
	// Field names the field, e.g. "commands[2].writes[0].key".
	Field string
	// Offset is the byte offset at which the field starts.
	Offset int
	// Msg says what is wrong.
	Msg string
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("kv: decode batch: field %s at byte %d: %s", e.Field, e.Offset, e.Msg)
}

// Unwrap lets callers test errors.Is(err, ErrMalformed).
func (e *DecodeError) Unwrap() error { return ErrMalformed }

// EncodeBatch returns the version-1 encoding of cmds.
func EncodeBatch(cmds []Command) []byte {
	return AppendBatch(make([]byte, 0, batchSizeHint(cmds)), cmds)
}

// AppendBatch appends the version-1 encoding of cmds to dst.
func AppendBatch(dst []byte, cmds []Command) []byte {
	dst = append(dst, CodecVersion)
	dst = binary.AppendUvarint(dst, uint64(len(cmds)))
	for i := range cmds {
		c := &cmds[i]
		dst = appendBytes(dst, []byte(c.ID))
		dst = appendBytes(dst, []byte(c.Type))
		dst = append(dst, c.Class)
		dst = appendBytes(dst, []byte(c.Key))
		dst = append(dst, c.Verdict)
		dst = appendBytes(dst, c.Guard)
		dst = binary.AppendUvarint(dst, uint64(len(c.Effect.Writes)))
		for j := range c.Effect.Writes {
			w := &c.Effect.Writes[j]
			dst = appendBytes(dst, []byte(w.Key))
			var f byte
			if w.Delete {
				f |= flagDelete
			}
			if w.Unconditional {
				f |= flagUnconditional
			}
			dst = append(dst, f)
			dst = binary.AppendUvarint(dst, w.IfRev)
			dst = appendBytes(dst, w.Value)
		}
		dst = appendBytes(dst, c.Payload)
		dst = appendBytes(dst, []byte(c.Origin))
	}
	return dst
}

func batchSizeHint(cmds []Command) int {
	n := 1 + binary.MaxVarintLen64
	for i := range cmds {
		c := &cmds[i]
		n += 2 + 6*binary.MaxVarintLen64 + len(c.ID) + len(c.Type) + len(c.Key) + len(c.Guard) + len(c.Payload) + len(c.Origin)
		for j := range c.Effect.Writes {
			w := &c.Effect.Writes[j]
			n += 1 + 3*binary.MaxVarintLen64 + len(w.Key) + len(w.Value)
		}
	}
	return n
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// DecodeBatch decodes a batch written by EncodeBatch. Malformed input is
// rejected with a *DecodeError (wrapping ErrMalformed) naming the field.
//
// Decoding a well-formed batch allocates the command and write slices, one
// copy of the input that every decoded byte field points into, and the
// non-empty strings; field names are only built for an error.
func DecodeBatch(b []byte) ([]Command, error) {
	d := decoder{b: b}
	v, err := d.u8(topField("version"))
	if err != nil {
		return nil, err
	}
	if v != CodecVersion {
		return nil, &DecodeError{Field: "version", Offset: 0, Msg: fmt.Sprintf("unsupported version %d (this build reads version %d)", v, CodecVersion)}
	}
	// A command takes at least 9 bytes (7 length prefixes + 2 single bytes).
	n, err := d.count(topField("count"), 9)
	if err != nil {
		return nil, err
	}
	var cmds []Command
	if n > 0 {
		cmds = make([]Command, n)
	}
	for i := range cmds {
		c := &cmds[i]
		p := func(name string) field { return field{cmd: i, write: -1, name: name} }
		if c.ID, err = d.str(p("id")); err != nil {
			return nil, err
		}
		if c.Type, err = d.str(p("type")); err != nil {
			return nil, err
		}
		if c.Class, err = d.u8(p("class")); err != nil {
			return nil, err
		}
		if c.Key, err = d.str(p("key")); err != nil {
			return nil, err
		}
		if c.Verdict, err = d.u8(p("verdict")); err != nil {
			return nil, err
		}
		if c.Guard, err = d.bytes(p("guard")); err != nil {
			return nil, err
		}
		// A write takes at least 4 bytes (2 length prefixes, flags, IfRev).
		nw, err := d.count(p("writes.count"), 4)
		if err != nil {
			return nil, err
		}
		if nw > 0 {
			c.Effect.Writes = make([]Write, nw)
		}
		for j := range c.Effect.Writes {
			w := &c.Effect.Writes[j]
			pw := func(name string) field { return field{cmd: i, write: j, name: name} }
			if w.Key, err = d.str(pw("key")); err != nil {
				return nil, err
			}
			off := d.off
			f, err := d.u8(pw("flags"))
			if err != nil {
				return nil, err
			}
			if f&^flagsKnown != 0 {
				return nil, &DecodeError{Field: pw("flags").String(), Offset: off, Msg: fmt.Sprintf("unknown flag bits %#x", f&^flagsKnown)}
			}
			w.Delete = f&flagDelete != 0
			w.Unconditional = f&flagUnconditional != 0
			if w.IfRev, err = d.uvarint(pw("if_rev")); err != nil {
				return nil, err
			}
			if w.Value, err = d.bytes(pw("value")); err != nil {
				return nil, err
			}
		}
		if c.Payload, err = d.bytes(p("payload")); err != nil {
			return nil, err
		}
		if c.Origin, err = d.str(p("origin")); err != nil {
			return nil, err
		}
	}
	if d.off != len(d.b) {
		return nil, &DecodeError{Field: "end", Offset: d.off, Msg: fmt.Sprintf("%d trailing bytes after the last command", len(d.b)-d.off)}
	}
	return cmds, nil
}

// field names a field for a DecodeError; String builds the name, which is
// only needed when decoding fails.
type field struct {
	cmd, write int // -1 outside a command / write
	name       string
	suffix     string
}

func topField(name string) field { return field{cmd: -1, write: -1, name: name} }

func (f field) String() string {
	switch {
	case f.write >= 0:
		return fmt.Sprintf("commands[%d].writes[%d].%s%s", f.cmd, f.write, f.name, f.suffix)
	case f.cmd >= 0:
		return fmt.Sprintf("commands[%d].%s%s", f.cmd, f.name, f.suffix)
	}
	return f.name + f.suffix
}

type decoder struct {
	b   []byte
	off int
	// own is a copy of b, made on the first non-empty byte field; decoded
	// byte fields are capacity-limited slices of it, so the caller never
	// aliases the input and one allocation serves the whole batch.
	own []byte
}

func (d *decoder) u8(f field) (byte, error) {
	if d.off >= len(d.b) {
		return 0, &DecodeError{Field: f.String(), Offset: d.off, Msg: "unexpected end of input"}
	}
	v := d.b[d.off]
	d.off++
	return v, nil
}

func (d *decoder) uvarint(f field) (uint64, error) {
	v, n := binary.Uvarint(d.b[d.off:])
	switch {
	case n == 0:
		return 0, &DecodeError{Field: f.String(), Offset: d.off, Msg: "unexpected end of input in varint"}
	case n < 0:
		return 0, &DecodeError{Field: f.String(), Offset: d.off, Msg: "varint overflows 64 bits"}
	}
	// Reject non-minimal encodings so that every batch has one encoding.
	if n > 1 && d.b[d.off+n-1] == 0 {
		return 0, &DecodeError{Field: f.String(), Offset: d.off, Msg: "varint is not minimally encoded"}
	}
	d.off += n
	return v, nil
}

// count reads an element count and checks that the remaining input could
// hold that many elements of at least minSize bytes each.
func (d *decoder) count(f field, minSize int) (int, error) {
	off := d.off
	v, err := d.uvarint(f)
	if err != nil {
		return 0, err
	}
	rem := uint64(len(d.b) - d.off)
	if v > rem/uint64(minSize) {
		return 0, &DecodeError{Field: f.String(), Offset: off, Msg: fmt.Sprintf("count %d cannot fit in the remaining %d bytes", v, rem)}
	}
	return int(v), nil
}

// span reads a length-prefixed field and returns its offsets in d.b.
func (d *decoder) span(f field) (start, end int, err error) {
	off := d.off
	lf := f
	lf.suffix = ".length"
	l, err := d.uvarint(lf)
	if err != nil {
		return 0, 0, err
	}
	rem := uint64(len(d.b) - d.off)
	if l > rem {
		return 0, 0, &DecodeError{Field: f.String(), Offset: off, Msg: fmt.Sprintf("length %d exceeds the remaining %d bytes", l, rem)}
	}
	start = d.off
	d.off += int(l)
	return start, d.off, nil
}

func (d *decoder) bytes(f field) ([]byte, error) {
	start, end, err := d.span(f)
	if err != nil || start == end {
		return nil, err
	}
	if d.own == nil {
		d.own = append([]byte(nil), d.b...)
	}
	return d.own[start:end:end], nil
}

func (d *decoder) str(f field) (string, error) {
	start, end, err := d.span(f)
	if err != nil {
		return "", err
	}
	return string(d.b[start:end]), nil
}
