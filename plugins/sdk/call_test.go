package sdk

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/writ-dev/writ/kv"
)

func TestSetResultJSON(t *testing.T) {
	c := &Call{Type: "t"}
	doc := []byte(`{"job_id":"j1","state":"PENDING"}`)
	if err := c.SetResultJSON(doc); err != nil {
		t.Fatal(err)
	}
	if string(c.result) != string(doc) {
		t.Fatalf("result %s", c.result)
	}
	for _, bad := range []string{``, `{`, `{"a":1}x`, `{"a":}`, "\"\xff"} {
		c := &Call{Type: "t"}
		err := c.SetResultJSON([]byte(bad))
		var e *Error
		if err == nil || !asErr(err, &e) || e.Kind != KindInternal || !strings.Contains(e.Msg, "not a JSON document") {
			t.Errorf("SetResultJSON(%q) = %v, want an internal error", bad, err)
		}
		if c.result != nil {
			t.Errorf("SetResultJSON(%q) kept the document", bad)
		}
	}
}

func asErr(err error, e **Error) bool {
	x, ok := err.(*Error)
	*e = x
	return ok
}

// FuzzMachineRecord: where the canonical decoder takes a record, it yields
// what encoding/json yields (and json accepts the record).
func FuzzMachineRecord(f *testing.F) {
	for _, s := range []string{`{"state":"RUNNING","order":12}`, `{"state":"A"}`, `{"state":""}`,
		`{"state":"A","order":01}`, `{"state":"A","order":18446744073709551615}`, `{"state":"A","order":18446744073709551616}`,
		`{"state":"\u0041"}`, `{"state":"A" }`, `{"order":1,"state":"A"}`, `{"state":"A","order":}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		state, order, ok := parseMachineRecord(b)
		if !ok {
			return
		}
		var m struct {
			State string `json:"state"`
			Order uint64 `json:"order"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%q: canonical decoder took a record json refuses: %v", b, err)
		}
		if m.State != state || m.Order != order {
			t.Fatalf("%q: canonical decoder (%q, %d), json (%q, %d)", b, state, order, m.State, m.Order)
		}
	})
}

func TestMachineStateFastAndSlow(t *testing.T) {
	c := &Call{state: []kv.Record{
		{Key: "_m/job/a", Value: []byte(`{"state":"RUNNING","order":7}`), Rev: 3},
		{Key: "_m/job/b", Value: []byte(`{ "order": 9, "state": "HELD" }`), Rev: 4},
		{Key: "_m/job/c", Value: []byte(`{"state":`), Rev: 5},
	}}
	if s, o, ok := c.MachineState("job", "a"); !ok || s != "RUNNING" || o != 7 {
		t.Errorf("canonical: %q %d %v", s, o, ok)
	}
	if s, o, ok := c.MachineState("job", "b"); !ok || s != "HELD" || o != 9 {
		t.Errorf("other form: %q %d %v", s, o, ok)
	}
	if _, _, ok := c.MachineState("job", "c"); ok || !strings.Contains(c.misuse, "malformed") {
		t.Errorf("malformed: ok=%v misuse %q", ok, c.misuse)
	}
}
