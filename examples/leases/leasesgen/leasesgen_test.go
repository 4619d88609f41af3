package leasesgen

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/writ-dev/writ/schema/ir"
)

var update = flag.Bool("update", false, "rewrite testdata/encoding.golden")

// samples holds one valid payload per entry type, with every optional field
// set, so the golden pins every field's encoding.
var samples = map[string]string{
	NameLeaseControl:      `{"lease_id":"db-primary","action":"create","max_ttl_ms":60000,"note":"the primary's write lock"}`,
	NameLeaseAcquire:      `{"lease_id":"db-primary","holder_id":"node-1","ttl_ms":15000,"tags":["zone=eu-1","primary"],"note":"failover"}`,
	NameLeaseRelease:      `{"lease_id":"db-primary","holder_id":"node-1","epoch":7}`,
	NameLeaseRenew:        `{"lease_id":"db-primary","holder_id":"node-1","epoch":7,"ttl_ms":30000}`,
	NameHolderRegister:    `{"holder_id":"node-1","session_ttl_ms":10000,"max_leases":8,"address":"node-1.eu:7070","labels":["zone=eu-1"]}`,
	NameHolderControl:     `{"holder_id":"node-1","action":"deregister","reason":"decommissioned"}`,
	NameLeaseExpiry:       `{"report_id":"db-primary.7","lease_id":"db-primary","holder_id":"node-1","epoch":7,"detected_by":"sweeper-1","overdue_ms":250}`,
	NameHolderHeartbeat:   `{"report_id":"hb-42","holder_id":"node-1","seq":42,"held":["db-primary","cron"],"load":0.25,"status":"serving"}`,
	NameHolderSessionLost: `{"report_id":"lost-3","holder_id":"node-1","seq":43,"detected_by":"sweeper-1"}`,
	NameHolderShutdown:    `{"report_id":"bye-1","holder_id":"node-1","seq":44,"reason":"rolling restart"}`,
	NameLeaseGrantBatch:   `{"batch_id":"b1","arbiter":"arbiter-1","items":[{"lease_id":"a","holder_id":"node-1","ttl_ms":1000},{"lease_id":"b","holder_id":"node-2","ttl_ms":2000,"tags":["x"]}]}`,
	NameLeasesConfig:      `{"version":"1.2.3","settings":{"default_ttl_ms":15000,"max_ttl_ms":600000,"max_leases_per_holder":16,"expiry_sweep":"500ms","reclaim_expired":true,"grace_ms":1000}}`,
}

func parse(t testing.TB, name, js string) ir.Payload {
	t.Helper()
	d, ok := Catalog().Type(name)
	if !ok {
		t.Fatalf("type %s not in catalog", name)
	}
	p, err := d.ParseJSON([]byte(js))
	if err != nil {
		t.Fatalf("%s: ParseJSON(%.120s): %v", name, js, err)
	}
	return p
}

func encodeAll(t testing.TB) []byte {
	var out bytes.Buffer
	names := make([]string, 0, len(samples))
	for n := range samples {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		b, err := EncodeEntry(parse(t, n, samples[n]))
		if err != nil {
			t.Fatal(err)
		}
		out.WriteString(n + " " + hex.EncodeToString(b) + "\n")
	}
	return out.Bytes()
}

// TestEncodingGolden pins the binary encoding (including type numbers) of
// every entry type of the leases schema.
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
	for _, line := range strings.Split(strings.TrimSpace(string(want)), "\n") {
		name, hx, _ := strings.Cut(line, " ")
		b, _ := hex.DecodeString(hx)
		p, err := DecodeEntry(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if q := parse(t, name, samples[name]); !reflect.DeepEqual(p, q) {
			t.Fatalf("%s: golden decodes to %#v, want %#v", name, p, q)
		}
	}
}

func TestParseJSONAndBinaryRoundTrip(t *testing.T) {
	for name, js := range samples {
		p := parse(t, name, js)
		b, err := EncodeEntry(p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := DecodeEntry(b)
		if err != nil {
			t.Fatalf("%s: DecodeEntry: %v", name, err)
		}
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("%s: binary round trip changed the payload:\n%#v\n%#v", name, p, q)
		}
	}
}

func TestRoutingAccessors(t *testing.T) {
	p := parse(t, NameLeaseExpiry, samples[NameLeaseExpiry])
	if o, ok := p.Order(); !ok || o != 7 || p.IdempotencyKey() != "db-primary.7" || p.TargetState() != "EXPIRED" || p.InstanceKey() != "db-primary" {
		t.Fatalf("lease.expiry accessors: order %d %v id %q to %q inst %q", o, ok, p.IdempotencyKey(), p.TargetState(), p.InstanceKey())
	}
	if !reflect.DeepEqual(p.Keys(), []string{"lease/db-primary", "holder/node-1"}) {
		t.Fatalf("lease.expiry keys: %v", p.Keys())
	}
	p = parse(t, NameHolderControl, `{"holder_id":"h1","action":"evict"}`)
	if p.TargetState() != "LOST" {
		t.Fatalf("holder.control evict: to %q", p.TargetState())
	}
	p = parse(t, NameLeaseControl, `{"lease_id":"l1","action":"retire"}`)
	if p.TargetState() != "RETIRED" || p.InstanceKey() != "l1" {
		t.Fatalf("lease.control retire: to %q inst %q", p.TargetState(), p.InstanceKey())
	}
	p = parse(t, NameHolderHeartbeat, samples[NameHolderHeartbeat])
	if o, ok := p.Order(); !ok || o != 42 || p.TargetState() != "" || p.InstanceKey() != "node-1" {
		t.Fatalf("holder.heartbeat: order %d %v, to %q (a heartbeat moves no state), inst %q", o, ok, p.TargetState(), p.InstanceKey())
	}
	p = parse(t, NameLeaseRenew, samples[NameLeaseRenew])
	if _, ok := p.Order(); ok || p.TargetState() != "" || p.InstanceKey() != "db-primary" {
		t.Fatalf("lease.renew: it has no order and no target state")
	}
	p = parse(t, NameLeaseGrantBatch, samples[NameLeaseGrantBatch])
	items := p.Items()
	if len(items) != 2 || items[0].EntryType() != NameLeaseAcquire || items[1].TargetState() != "HELD" || items[1].InstanceKey() != "b" || p.IdempotencyKey() != "b1" {
		t.Fatalf("lease.grant_batch items: %v", items)
	}
}

func TestClassificationIsExhaustive(t *testing.T) {
	cat := Catalog()
	want := map[string]ir.Class{
		NameLeaseControl: ir.ClassRequest, NameLeaseAcquire: ir.ClassRequest, NameLeaseRelease: ir.ClassRequest,
		NameLeaseRenew: ir.ClassRequest, NameHolderRegister: ir.ClassRequest, NameHolderControl: ir.ClassRequest,
		NameLeaseExpiry: ir.ClassFact, NameHolderHeartbeat: ir.ClassFact, NameHolderSessionLost: ir.ClassFact, NameHolderShutdown: ir.ClassFact,
		NameLeaseGrantBatch: ir.ClassReceipt, NameLeasesConfig: ir.ClassConfig,
	}
	if len(cat.Types()) != len(want) {
		t.Fatalf("catalog has %d types, want %d", len(cat.Types()), len(want))
	}
	for _, d := range cat.Types() {
		if Classify(d.Name) != d.Class || d.Class != want[d.Name] {
			t.Errorf("%s: Classify=%v desc=%v want %v", d.Name, Classify(d.Name), d.Class, want[d.Name])
		}
		if got, ok := cat.TypeByNumber(d.Number); !ok || got != d {
			t.Errorf("%s: TypeByNumber(%d) mismatch", d.Name, d.Number)
		}
		if d.Entry.Machine != "" && (d.Machine == nil || d.Machine.Name != d.Entry.Machine) {
			t.Errorf("%s: machine not wired", d.Name)
		}
	}
	if Classify("lease.steal") != ir.ClassUnknown {
		t.Fatal("undeclared type must be unclassified")
	}
	if cat.Fingerprint() != cat.Schema().Fingerprint() {
		t.Fatal("generated fingerprint differs from the embedded model's")
	}
}

// TestGuardTablesAreCyclic checks the generated tables against the model
// and the cycles the domain depends on.
func TestGuardTablesAreCyclic(t *testing.T) {
	lm, _ := Catalog().Machine("lease")
	for _, from := range LeaseStates {
		for _, to := range LeaseStates {
			if LeaseAllowed(from, to) != lm.Allowed(from.String(), to.String()) {
				t.Errorf("lease %s→%s: table %v model %v", from, to, LeaseAllowed(from, to), lm.Allowed(from.String(), to.String()))
			}
		}
		if from.Terminal() != lm.IsTerminal(from.String()) || from.Initial() != lm.IsInitial(from.String()) {
			t.Errorf("lease %s: terminal/initial mismatch", from)
		}
	}
	hm, _ := Catalog().Machine("holder")
	for _, from := range HolderStates {
		for _, to := range HolderStates {
			if HolderAllowed(from, to) != hm.Allowed(from.String(), to.String()) {
				t.Errorf("holder %s→%s: table %v model %v", from, to, HolderAllowed(from, to), hm.Allowed(from.String(), to.String()))
			}
		}
	}
	cycle := []LeaseState{LeaseFree, LeaseHeld, LeaseExpired, LeaseHeld, LeaseFree, LeaseHeld, LeaseExpired, LeaseFree}
	for i := 1; i < len(cycle); i++ {
		if !LeaseAllowed(cycle[i-1], cycle[i]) {
			t.Errorf("lease cycle broken at %s→%s", cycle[i-1], cycle[i])
		}
	}
	if !HolderAllowed(HolderActive, HolderLost) || !HolderAllowed(HolderLost, HolderActive) {
		t.Error("holder ACTIVE ⇄ LOST must be a cycle")
	}
	for _, to := range LeaseStates {
		if LeaseAllowed(LeaseRetired, to) || HolderAllowed(HolderDeregistered, HolderState(to%3)) {
			t.Errorf("a terminal state has an exit (%s)", to)
		}
	}
	if LeaseAllowed(LeaseHeld, LeaseRetired) || LeaseAllowed(LeaseFree, LeaseExpired) {
		t.Error("a HELD lease must not retire and a FREE one must not expire")
	}
}

// maxBatch builds a lease.grant_batch at every maximum the schema allows:
// 256 items, each with 16 tags of 63 bytes and a 1024-rune note of
// multi-byte runes, and 63-character IDs.
func maxBatch(items, tags, noteRunes int) string {
	id := func(p string, i int) string {
		s := fmt.Sprintf("%s%d", p, i)
		return s + strings.Repeat("x", 63-len(s))
	}
	tag := strings.Repeat("t", 60)
	var its []map[string]any
	for i := 0; i < items; i++ {
		ts := make([]string, tags)
		for k := range ts {
			ts[k] = fmt.Sprintf("%s%03d", tag, k)
		}
		its = append(its, map[string]any{"lease_id": id("l", i), "holder_id": id("h", i), "ttl_ms": 3_600_000, "tags": ts, "note": strings.Repeat("é", noteRunes)})
	}
	b, _ := json.Marshal(map[string]any{"batch_id": id("b", 0), "arbiter": id("a", 0), "items": its})
	return string(b)
}

func TestMaximumSizes(t *testing.T) {
	d, _ := Catalog().Type(NameLeaseGrantBatch)
	js := maxBatch(256, 16, 1024)
	p, err := d.ParseJSON([]byte(js))
	if err != nil {
		t.Fatalf("the largest valid batch (%d bytes) is refused: %v", len(js), err)
	}
	b, err := EncodeEntry(p)
	if err != nil {
		t.Fatal(err)
	}
	q, err := DecodeEntry(b)
	if err != nil || !reflect.DeepEqual(p, q) {
		t.Fatalf("the largest batch does not round-trip (%d bytes binary): %v", len(b), err)
	}
	for _, tc := range []struct {
		js, field, rule string
	}{
		{maxBatch(257, 0, 0), "items", "list.MinItems(1) & list.MaxItems(256)"},
		{maxBatch(1, 17, 0), "items[0].tags", "list.MaxItems(16)"},
		{maxBatch(1, 0, 1025), "items[0].note", "strings.MaxRunes(1024)"},
		{`{"batch_id":"b","arbiter":"a","items":[]}`, "items", "list.MinItems(1) & list.MaxItems(256)"},
	} {
		_, err := d.ParseJSON([]byte(tc.js))
		var fe *ir.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || fe.Rule != tc.rule {
			t.Errorf("%.80s…: want field %q rule %q, got %v", tc.js, tc.field, tc.rule, err)
		}
	}
}

func TestParseJSONErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct{ typ, in, field, rule string }{
		{NameLeaseAcquire, `{"lease_id":"l","holder_id":"h","ttl_ms":99}`, "ttl_ms", ">=100"},
		{NameLeaseAcquire, `{"lease_id":"l","holder_id":"h","ttl_ms":3600001}`, "ttl_ms", "<=3600000"},
		{NameLeaseAcquire, `{"lease_id":"L","holder_id":"h","ttl_ms":100}`, "lease_id", `=~"^[a-z0-9][a-z0-9._-]{0,62}$"`},
		{NameLeaseAcquire, `{"lease_id":"l","holder_id":"h","ttl_ms":100,"owner":"x"}`, "owner", "closed struct"},
		{NameLeaseControl, `{"lease_id":"l","action":"steal"}`, "action", `"create" | "retire"`},
		{NameLeaseRelease, `{"lease_id":"l","holder_id":"h","epoch":-1}`, "epoch", ">=0"},
		{NameHolderRegister, `{"holder_id":"h","session_ttl_ms":5000,"address":"Host:80"}`, "address", `=~"^[a-z0-9][a-z0-9.-]{0,252}:[0-9]{1,5}$"`},
		{NameHolderHeartbeat, `{"report_id":"r","holder_id":"h","seq":1,"load":1.5}`, "load", "<=1"},
		{NameHolderHeartbeat, `{"report_id":"r","holder_id":"h","seq":1,"status":""}`, "status", "strings.MinRunes(1) & strings.MaxRunes(256)"},
		{NameLeasesConfig, `{"version":"1","settings":{"default_ttl_ms":100,"max_ttl_ms":100,"expiry_sweep":"1s","reclaim_expired":"yes"}}`, "settings.reclaim_expired", "bool"},
	} {
		d, _ := Catalog().Type(tc.typ)
		_, err := d.ParseJSON([]byte(tc.in))
		var fe *ir.FieldError
		if !errors.As(err, &fe) {
			t.Errorf("%s %s: want FieldError, got %v", tc.typ, tc.in, err)
			continue
		}
		if fe.Field != tc.field || fe.Type != tc.typ || fe.Rule != tc.rule {
			t.Errorf("%s %s: got field %q rule %q type %q (%v)", tc.typ, tc.in, fe.Field, fe.Rule, fe.Type, err)
		}
	}
}

// FuzzDecodeEntry: the decoder never panics, and whatever it accepts
// validates and re-encodes to bytes that decode to the same payload.
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
		if err != nil || !reflect.DeepEqual(p, q) {
			t.Fatalf("round trip changed the payload: %v", err)
		}
	})
}

// FuzzParseJSON: the JSON decoder never panics, accepted payloads validate
// and round-trip through the binary encoding.
func FuzzParseJSON(f *testing.F) {
	types := Catalog().Types()
	for i, d := range types {
		f.Add(uint8(i), []byte(samples[d.Name]))
	}
	f.Add(uint8(0), []byte(`{"lease_id":"l","lease_id":"l"}`))
	f.Fuzz(func(t *testing.T, n uint8, b []byte) {
		d := types[int(n)%len(types)]
		p, err := d.ParseJSON(b)
		if err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("accepted JSON does not validate: %v", err)
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
