package jobsgen

import (
	"bytes"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/encoding.golden")

// samples holds one valid payload per entry type, with every optional field
// set where the type has one, so the golden pins every field's encoding.
var samples = map[string]string{
	NameJobSubmit:        `{"job_id":"j1","queue":"default","priority":5,"command":"echo hi","cpu_millis":500,"mem_bytes":1048576}`,
	NameJobControl:       `{"job_id":"j1","action":"hold","reason":"maintenance"}`,
	NameQueueControl:     `{"queue":"default","action":"pause"}`,
	NameWorkerJoin:       `{"worker_id":"w1","capacity":4,"labels":["gpu","zone=eu-1"]}`,
	NameWorkerUpdate:     `{"worker_id":"w1","capacity":8}`,
	NameWorkerControl:    `{"worker_id":"w1","action":"drain"}`,
	NameJobStateReport:   `{"report_id":"r1","job_id":"j1","state":"FAILED","seq":3,"worker_id":"w1","exit_code":-2,"message":"oom"}`,
	NameWorkerUsage:      `{"report_id":"r2","worker_id":"w1","seq":1,"cpu_millis":10,"mem_bytes":1024}`,
	NameJobPendingReason: `{"report_id":"r3","job_id":"j1","reason":"no capacity","seq":2}`,
	NameWorkerDeath:      `{"report_id":"r4","worker_id":"w1","detected_by":"ctl-1","seq":9}`,
	NameJobDispatch:      `{"dispatch_id":"d1","scheduler":"s1","items":[{"job_id":"j1","worker_id":"w1"},{"job_id":"j2","worker_id":"w2"}]}`,
	NameJobAssign:        `{"job_id":"j1","worker_id":"w1"}`,
	NameClusterConfig:    `{"version":"1.2","settings":{"commit_timeout":"5s","heartbeat":"100ms","max_batch":64,"max_inflight":1000,"log_level":"info","fact_retry":"1s","dead_worker_grace":"30s"}}`,
}

func encodeAll(t testing.TB) []byte {
	var out bytes.Buffer
	names := make([]string, 0, len(samples))
	for n := range samples {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		d, ok := Catalog().Type(n)
		if !ok {
			t.Fatalf("%s not declared", n)
		}
		p, err := d.ParseJSON([]byte(samples[n]))
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		b, err := EncodeEntry(p)
		if err != nil {
			t.Fatal(err)
		}
		out.WriteString(n + " " + hex.EncodeToString(b) + "\n")
	}
	return out.Bytes()
}

// TestEncodingGolden pins the binary encoding (including type numbers) of
// every entry type. A change here breaks rolling upgrades: add a new entry
// type instead of changing an old one.
func TestEncodingGolden(t *testing.T) {
	if len(samples) != len(Catalog().Types()) {
		t.Fatalf("samples cover %d of %d types", len(samples), len(Catalog().Types()))
	}
	got := encodeAll(t)
	path := filepath.Join("testdata", "encoding.golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding changed (run with -update only if the change is intended and compatible):\ngot:\n%s\nwant:\n%s", got, want)
	}
	// Every golden line decodes back to the sample.
	for _, line := range strings.Split(strings.TrimSpace(string(want)), "\n") {
		name, hx, _ := strings.Cut(line, " ")
		b, _ := hex.DecodeString(hx)
		p, err := DecodeEntry(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		d, _ := Catalog().Type(name)
		q, _ := d.ParseJSON([]byte(samples[name]))
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("%s: golden decodes to %#v, want %#v", name, p, q)
		}
	}
}

// FuzzDecodeEntry: the decoder never panics, and whatever it accepts
// re-encodes to bytes that decode to the same payload.
func FuzzDecodeEntry(f *testing.F) {
	for _, line := range strings.Split(strings.TrimSpace(string(encodeAll(f))), "\n") {
		_, hx, _ := strings.Cut(line, " ")
		b, _ := hex.DecodeString(hx)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodeEntry(b)
		if err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("decoded payload does not validate: %v", err)
		}
		enc, err := EncodeEntry(p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := DecodeEntry(enc)
		if err != nil {
			t.Fatalf("re-encoded payload does not decode: %v", err)
		}
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("round trip changed the payload")
		}
	})
}

// FuzzParseJSON: the JSON decoder never panics and accepted payloads
// round-trip through the binary encoding.
func FuzzParseJSON(f *testing.F) {
	for _, s := range samples {
		f.Add(uint8(0), []byte(s))
	}
	f.Add(uint8(0), []byte(`{"job_id":"j1","job_id":"j1"}`))
	f.Add(uint8(10), []byte(`{"dispatch_id":"d","scheduler":"s","items":[{}]}`))
	f.Fuzz(func(t *testing.T, n uint8, b []byte) {
		types := Catalog().Types()
		d := types[int(n)%len(types)]
		p, err := d.ParseJSON(b)
		if err != nil {
			return
		}
		enc, err := EncodeEntry(p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := DecodeEntry(enc)
		if err != nil || !reflect.DeepEqual(p, q) {
			t.Fatalf("accepted JSON does not round-trip: %v", err)
		}
	})
}

func BenchmarkJobSubmitDecodeValidate(b *testing.B) {
	d, _ := Catalog().Type(NameJobSubmit)
	p, err := d.ParseJSON([]byte(samples[NameJobSubmit]))
	if err != nil {
		b.Fatal(err)
	}
	enc, _ := p.AppendBinary(nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.ParseBinary(enc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkJobSubmitParseJSON(b *testing.B) {
	d, _ := Catalog().Type(NameJobSubmit)
	js := []byte(samples[NameJobSubmit])
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.ParseJSON(js); err != nil {
			b.Fatal(err)
		}
	}
}
