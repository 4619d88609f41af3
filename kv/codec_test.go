package kv

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func sampleBatch() []Command {
	return []Command{
		{
			ID: "req-1", Type: "job.submit", Class: 1, Key: "j1", Verdict: 1,
			Guard: []byte("guard"),
			Effect: Effect{Writes: []Write{
				{Key: "job/j1", Value: []byte(`{"state":"PENDING"}`), IfRev: 0},
				{Key: "queue/default", Value: []byte("q"), IfRev: 300},
				{Key: "old", Delete: true, IfRev: 7},
				{Key: "_outcome/x", Value: []byte("v"), Unconditional: true},
			}},
			Payload: []byte(`{"job_id":"j1"}`),
			Origin:  "n1",
		},
		{Type: "writ.noop"},
	}
}

// TestCodecGolden pins the version-1 wire format: a change that alters the
// bytes of an existing batch breaks every replica that replays old entries.
func TestCodecGolden(t *testing.T) {
	enc := EncodeBatch(sampleBatch())
	golden := filepath.Join("testdata", "batch_v1.hex")
	if os.Getenv("WRITTEST_UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(golden, []byte(hex.EncodeToString(enc)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("read golden (regenerate with WRITTEST_UPDATE_GOLDEN=1 only for a NEW version): %v", err)
	}
	want, err := hex.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(enc, want) {
		t.Fatalf("encoding changed:\n got %x\nwant %x", enc, want)
	}
	dec, err := DecodeBatch(want)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(dec, sampleBatch()) {
		t.Fatalf("decoded golden differs:\n got %+v\nwant %+v", dec, sampleBatch())
	}
}

func TestCodecRoundTripEmpty(t *testing.T) {
	for _, b := range [][]Command{nil, {}, {{}}} {
		dec, err := DecodeBatch(EncodeBatch(b))
		if err != nil {
			t.Fatal(err)
		}
		if len(dec) != len(b) {
			t.Fatalf("len %d, want %d", len(dec), len(b))
		}
	}
}

func TestCodecRejectsMalformedNamingTheField(t *testing.T) {
	good := EncodeBatch(sampleBatch())
	cases := []struct {
		name  string
		in    []byte
		field string
	}{
		{"empty", nil, "version"},
		{"bad version", append([]byte{9}, good[1:]...), "version"},
		{"huge count", []byte{1, 0xff, 0xff, 0x03}, "count"},
		{"truncated id", []byte{1, 1, 20, 'a', 0, 0, 0, 0, 0, 0, 0}, "commands[0].id"},
		{"trailing", append(append([]byte{}, good...), 0), "end"},
		{"non-minimal varint", []byte{1, 0x80, 0x00}, "count"},
	}
	// Corrupt the flags byte of the first write: find it by re-encoding a
	// batch with a single write and patching.
	one := EncodeBatch([]Command{{Effect: Effect{Writes: []Write{{Key: "k"}}}}})
	// layout: ver, count, id, type, class, key, verdict, guard, nwrites, keylen, 'k', flags
	flagsAt := 11
	bad := append([]byte{}, one...)
	bad[flagsAt] = 0x80
	cases = append(cases, struct {
		name  string
		in    []byte
		field string
	}{"unknown flags", bad, "commands[0].writes[0].flags"})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeBatch(c.in)
			if err == nil {
				t.Fatal("decoded malformed input without error")
			}
			var de *DecodeError
			if !errors.As(err, &de) || !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not a *DecodeError wrapping ErrMalformed", err)
			}
			if de.Field != c.field {
				t.Fatalf("field %q, want %q (err: %v)", de.Field, c.field, err)
			}
			if !strings.Contains(err.Error(), c.field) {
				t.Fatalf("message %q does not name the field", err)
			}
		})
	}
}

// FuzzDecodeBatch checks that the decoder never panics, and that every
// input it accepts is canonical: re-encoding the decoded batch gives back the
// exact input bytes. The seed corpus in testdata/fuzz runs as a normal test.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(EncodeBatch(sampleBatch()))
	f.Add(EncodeBatch(nil))
	f.Add([]byte{})
	f.Add([]byte{1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		cmds, err := DecodeBatch(in)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) || de.Field == "" {
				t.Fatalf("error without a field: %v", err)
			}
			return
		}
		out := EncodeBatch(cmds)
		if !bytes.Equal(out, in) {
			t.Fatalf("not canonical:\n in %x\nout %x", in, out)
		}
	})
}
