// Package sdktest runs a handler Plugin in process for unit tests, over the
// same code path sdk.Serve uses for each Evaluate call (payload decoding
// and validation, per-item panic recovery, guarded writes, NeedKeys).
//
// It also offers small builders for the state an item carries (Doc, Absent,
// Machine) and a Store that applies results the way replicas do: every
// write's revision precondition is checked and a failed one applies
// nothing. Store is an in-memory stand-in for the replicated log, meant for
// handler unit tests only.
package sdktest

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/writ-dev/writ/kv"
	"github.com/writ-dev/writ/plugins/sdk"
)

// Harness evaluates entries with one plugin.
type Harness struct {
	t testing.TB
	p *sdk.Plugin
}

// New checks p's declaration (failing t if it is wrong) and returns a harness.
func New(t testing.TB, p *sdk.Plugin) *Harness {
	t.Helper()
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
	return &Harness{t: t, p: p}
}

// Eval evaluates one entry. payload is JSON-encoded unless it is already
// JSON text ([]byte, json.RawMessage or string).
func (h *Harness) Eval(typ, id string, payload any, state ...kv.Record) sdk.Result {
	h.t.Helper()
	return h.p.Evaluate(context.Background(), []sdk.Item{{Type: typ, ID: id, Payload: JSON(h.t, payload), State: state}})[0]
}

// Batch evaluates several items in one call, as the host does.
func (h *Harness) Batch(items ...sdk.Item) []sdk.Result {
	return h.p.Evaluate(context.Background(), items)
}

// JSON encodes v, passing []byte, json.RawMessage and string (raw JSON
// text) through.
func JSON(t testing.TB, v any) []byte {
	t.Helper()
	switch b := v.(type) {
	case []byte:
		return b
	case json.RawMessage:
		return b
	case string:
		return []byte(b)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("sdktest: encode %T: %v", v, err)
	}
	return b
}

// Doc is a present key holding v's JSON encoding at revision rev (>0).
func Doc(t testing.TB, key string, rev uint64, v any) kv.Record {
	t.Helper()
	if rev == 0 {
		t.Fatalf("sdktest: Doc(%q): revision 0 means absent; use Absent", key)
	}
	return kv.Record{Key: key, Value: JSON(t, v), Rev: rev}
}

// Absent is a key known to be absent (revision 0).
func Absent(key string) kv.Record { return kv.Record{Key: key} }

// Machine is the pipeline-owned machine-state record of one instance.
func Machine(machine, instance, state string, order, rev uint64) kv.Record {
	var b []byte
	if order > 0 {
		b = fmt.Appendf(nil, `{"state":%q,"order":%d}`, state, order)
	} else {
		b = fmt.Appendf(nil, `{"state":%q}`, state)
	}
	return kv.Record{Key: sdk.MachinePrefix + machine + "/" + instance, Value: b, Rev: rev}
}

// Written returns the write r makes to key, if any.
func Written(r sdk.Result, key string) (kv.Write, bool) {
	for _, w := range r.Writes {
		if w.Key == key {
			return w, true
		}
	}
	return kv.Write{}, false
}

// DecodeWrite decodes the JSON document r writes to key into v, failing t if
// there is no such write.
func DecodeWrite(t testing.TB, r sdk.Result, key string, v any) kv.Write {
	t.Helper()
	w, ok := Written(r, key)
	if !ok || w.Delete {
		t.Fatalf("sdktest: result writes no document to %q (writes: %s, err: %v, need: %v)", key, Keys(r), r.Err, r.NeedKeys)
	}
	if err := json.Unmarshal(w.Value, v); err != nil {
		t.Fatalf("sdktest: %q holds malformed JSON: %v", key, err)
	}
	return w
}

// Keys lists the keys r writes, sorted, for messages.
func Keys(r sdk.Result) string {
	ks := make([]string, 0, len(r.Writes))
	for _, w := range r.Writes {
		ks = append(ks, w.Key)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

// Store is an in-memory key/value state with revisions that applies
// results with the replicas' CAS rule, for handler unit tests.
type Store struct {
	rev  uint64
	recs map[string]kv.Record
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{recs: map[string]kv.Record{}} }

// Set writes a key unconditionally (test setup), returning its revision.
func (s *Store) Set(key string, value []byte) uint64 {
	s.rev++
	s.recs[key] = kv.Record{Key: key, Value: value, Rev: s.rev}
	return s.rev
}

// State returns the records for keys, absent ones with revision 0.
func (s *Store) State(keys ...string) []kv.Record {
	out := make([]kv.Record, 0, len(keys))
	for _, k := range keys {
		if r, ok := s.recs[k]; ok {
			out = append(out, r)
		} else {
			out = append(out, kv.Record{Key: k})
		}
	}
	return out
}

// Get returns a key's record.
func (s *Store) Get(key string) (kv.Record, bool) {
	r, ok := s.recs[key]
	return r, ok
}

// Apply applies r's writes if every precondition holds and reports which
// key failed otherwise (nothing is applied then).
func (s *Store) Apply(r sdk.Result) error {
	if r.Err != nil {
		return fmt.Errorf("sdktest: result is an error: %v", r.Err)
	}
	for _, w := range r.Writes {
		cur := s.recs[w.Key].Rev
		if cur != w.IfRev {
			return fmt.Errorf("sdktest: precondition failed on %q: revision %d, write expects %d", w.Key, cur, w.IfRev)
		}
	}
	s.rev++
	for _, w := range r.Writes {
		if w.Delete {
			delete(s.recs, w.Key)
			continue
		}
		s.recs[w.Key] = kv.Record{Key: w.Key, Value: w.Value, Rev: s.rev}
	}
	return nil
}
