package wire

import (
	"bytes"
	"encoding/hex"
	"math"
	"strings"
	"testing"
)

// TestEncodingPinned pins the bytes of every primitive: the encoding is
// stored in logs and sent between nodes, so any change here is a break.
func TestEncodingPinned(t *testing.T) {
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"string", AppendString(nil, "héllo"), "0668c3a96c6c6f"},
		{"empty string", AppendString(nil, ""), "00"},
		{"int -2", AppendInt(nil, -2), "03"},
		{"int 300", AppendInt(nil, 300), "d804"},
		{"int min", AppendInt(nil, math.MinInt64), "ffffffffffffffffff01"},
		{"uint 300", AppendUint(nil, 300), "ac02"},
		{"uint max", AppendUint(nil, math.MaxUint64), "ffffffffffffffffff01"},
		{"float 1.5", AppendFloat(nil, 1.5), "000000000000f83f"},
		{"float bits", AppendFloatBits(nil, math.Float64bits(math.Copysign(0, -1))), "0000000000000080"},
		{"true", AppendBool(nil, true), "01"},
		{"false", AppendBool(nil, false), "00"},
	} {
		if got := hex.EncodeToString(c.b); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestDecoderRoundTrip(t *testing.T) {
	var b []byte
	b = AppendString(b, "job-1")
	b = AppendInt(b, -7)
	b = AppendUint(b, 1<<40)
	b = AppendFloat(b, math.Pi)
	b = AppendBool(b, true)
	b = AppendUint(b, 2) // a list of two strings
	b = AppendString(b, "a")
	b = AppendString(b, "")
	d := NewDecoder("t", b)
	if s := d.Str("s"); s != "job-1" {
		t.Fatalf("Str %q", s)
	}
	if v := d.Int("i"); v != -7 {
		t.Fatalf("Int %d", v)
	}
	if v := d.Uint("u"); v != 1<<40 {
		t.Fatalf("Uint %d", v)
	}
	if v := d.Float("f"); v != math.Pi {
		t.Fatalf("Float %g", v)
	}
	if !d.Bool("b") {
		t.Fatal("Bool false")
	}
	n := d.Count("l")
	if n != 2 || d.Str("l") != "a" || d.Str("l") != "" {
		t.Fatalf("list of %d", n)
	}
	if err := d.Finish(); err != nil {
		t.Fatal(err)
	}
}

func TestDecoderErrors(t *testing.T) {
	for _, c := range []struct {
		name  string
		data  []byte
		read  func(d *Decoder)
		field string
		msg   string
	}{
		{"truncated uvarint", []byte{0x80}, func(d *Decoder) { d.Uint("u") }, "u", "truncated or overlong unsigned varint"},
		{"overlong uvarint", bytes.Repeat([]byte{0xff}, 11), func(d *Decoder) { d.Uint("u") }, "u", "truncated or overlong unsigned varint"},
		{"truncated varint", nil, func(d *Decoder) { d.Int("i") }, "i", "truncated or overlong varint"},
		{"string too long", []byte{5, 'a'}, func(d *Decoder) { d.Str("s") }, "s", "string length exceeds the remaining bytes"},
		{"string not UTF-8", []byte{1, 0xff}, func(d *Decoder) { d.Str("s") }, "s", "string is not valid UTF-8"},
		{"truncated float", make([]byte, 7), func(d *Decoder) { d.Float("f") }, "f", "truncated float"},
		{"empty flag", nil, func(d *Decoder) { d.Bool("b") }, "b", "truncated"},
		{"bad flag", []byte{2}, func(d *Decoder) { d.Bool("b") }, "b", "flag byte is neither 0 nor 1"},
		{"count beyond bytes", []byte{3, 0}, func(d *Decoder) { d.Count("l") }, "l", "list length exceeds the remaining bytes"},
		{"trailing bytes", []byte{1, 0, 0}, func(d *Decoder) { d.Bool("b") }, "", "2 trailing bytes after the payload"},
		// The first error sticks: the later read names no field of its own.
		{"first error sticks", []byte{2, 1}, func(d *Decoder) { d.Bool("first"); d.Bool("second") }, "first", "flag byte is neither 0 nor 1"},
	} {
		d := NewDecoder("x.y", c.data)
		c.read(&d)
		err := d.Finish()
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		want := c.msg + " (fix: re-encode the entry with the current schema)"
		if err.Type != "x.y" || err.Field != c.field || err.Rule != "binary encoding" || err.Msg != want {
			t.Errorf("%s: %#v", c.name, err)
		}
	}
}

// TestDecoderAfterErrorReadsZero: once failed, every read returns the zero
// value without looking at the bytes.
func TestDecoderAfterErrorReadsZero(t *testing.T) {
	d := NewDecoder("", []byte{9})
	d.Str("s")
	if d.Uint("u") != 0 || d.Int("i") != 0 || d.Str("s") != "" || d.Float("f") != 0 || d.Bool("b") || d.Count("c") != 0 {
		t.Fatal("a read after the error returned a value")
	}
	if err := d.Finish(); err == nil || !strings.Contains(err.Msg, "string length") {
		t.Fatalf("Finish: %v", err)
	}
}

// FuzzDecoder reads arbitrary bytes with an arbitrary sequence of reads
// (one op byte per read): it never panics, never allocates a list longer
// than the input, and whatever it reads completely re-encodes to bytes that
// read back to the same values.
func FuzzDecoder(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5}, []byte{0x05, 'h', 'e', 'l', 'l', 'o', 0x03, 0xac, 0x02, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, 1, 2})
	f.Add([]byte{5, 0, 0}, []byte{2, 1, 'a', 0})
	f.Add([]byte{4, 4}, []byte{1, 2})
	f.Fuzz(func(t *testing.T, ops, data []byte) {
		vals, err := readOps(ops, data)
		if err != nil {
			return
		}
		var b []byte
		for i, op := range ops {
			switch v := vals[i]; op % 6 {
			case 0:
				b = AppendString(b, v.(string))
			case 1:
				b = AppendInt(b, v.(int64))
			case 2:
				b = AppendUint(b, v.(uint64))
			case 3:
				b = AppendFloatBits(b, v.(uint64))
			case 4:
				b = AppendBool(b, v.(bool))
			case 5:
				b = AppendUint(b, uint64(v.(int)))
			}
		}
		if len(b) > len(data) {
			t.Fatalf("re-encoding grew: %x from %x", b, data)
		}
		again, err := readOps(ops, b)
		if err != nil {
			t.Fatalf("re-encoded bytes do not read: %v", err)
		}
		for i := range vals {
			if vals[i] != again[i] {
				t.Fatalf("read %d: %v, then %v", i, vals[i], again[i])
			}
		}
	})
}

// readOps reads data with the reads ops names, all of which must succeed
// and consume data exactly.
func readOps(ops, data []byte) ([]any, error) {
	d := NewDecoder("fuzz", data)
	vals := make([]any, len(ops))
	for i, op := range ops {
		switch op % 6 {
		case 0:
			vals[i] = d.Str("s")
		case 1:
			vals[i] = d.Int("i")
		case 2:
			vals[i] = d.Uint("u")
		case 3:
			vals[i] = d.FloatBits("f")
		case 4:
			vals[i] = d.Bool("b")
		case 5:
			n := d.Count("c")
			if n > len(data) {
				panic("count beyond the input")
			}
			vals[i] = n
		}
	}
	if err := d.Finish(); err != nil {
		return nil, err
	}
	return vals, nil
}
