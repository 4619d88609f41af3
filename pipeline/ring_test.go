package pipeline

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
)

// The watch ring keeps the newest cap events in order across many wraps,
// and first names the lowest index still fully retained.
func TestWatchRingWraps(t *testing.T) {
	r := watchRing{cap: 5}
	for i := 1; i <= 23; i++ {
		// two events per index, as a two-command batch
		r.add(Event{Index: uint64((i + 1) / 2), Pos: (i + 1) % 2})
		want := min(i, 5)
		if r.n != want {
			t.Fatalf("after %d: %d events retained, want %d", i, r.n, want)
		}
		for k := 0; k < r.n; k++ {
			seq := i - r.n + 1 + k
			if ev := r.at(k); ev.Index != uint64((seq+1)/2) || ev.Pos != (seq+1)%2 {
				t.Fatalf("after %d: event %d is (%d,%d), want seq %d", i, k, ev.Index, ev.Pos, seq)
			}
		}
		if i > 5 {
			dropped := uint64((i - 5 + 1) / 2) // index of the last overwritten event
			if r.first != dropped+1 {
				t.Fatalf("after %d: first %d, want %d", i, r.first, dropped+1)
			}
		}
	}
}

// The outcome cache evicts in insertion order, and updating a retained
// outcome neither evicts nor moves it.
func TestOutcomeCacheFIFO(t *testing.T) {
	c := newOutcomeCache(3)
	for i := 1; i <= 3; i++ {
		c.put(strconv.Itoa(i), Outcome{Index: uint64(i)})
	}
	c.put("2", Outcome{Index: 20})
	c.put("4", Outcome{Index: 4}) // evicts 1
	c.put("5", Outcome{Index: 5}) // evicts 2
	for id, want := range map[string]uint64{"3": 3, "4": 4, "5": 5} {
		if o, ok := c.get(id); !ok || o.Index != want {
			t.Errorf("%s: %+v %v, want index %d", id, o, ok, want)
		}
	}
	for _, id := range []string{"1", "2"} {
		if _, ok := c.get(id); ok {
			t.Errorf("%s still retained", id)
		}
	}
	if len(c.m) != 3 {
		t.Errorf("map holds %d ids", len(c.m))
	}
}

// parseMachineRecord decodes the canonical form directly and everything
// else through encoding/json: both must agree with encoding/json alone.
func TestParseMachineRecordMatchesJSON(t *testing.T) {
	viaJSON := func(v []byte) (MachineRecord, error) {
		var raw struct {
			State string  `json:"state"`
			Order *uint64 `json:"order"`
		}
		if err := json.Unmarshal(v, &raw); err != nil {
			return MachineRecord{}, err
		}
		if raw.State == "" {
			return MachineRecord{}, fmt.Errorf("no state")
		}
		r := MachineRecord{State: raw.State}
		if raw.Order != nil {
			r.Order, r.HasOrder = *raw.Order, true
		}
		return r, nil
	}
	inputs := []string{
		`{"state":"RUNNING"}`, `{"state":"RUNNING","order":0}`, `{"state":"RUNNING","order":3}`,
		`{"state":"A","order":18446744073709551615}`, `{"state":"A","order":18446744073709551616}`,
		`{"state":"A","order":01}`, `{"state":"A","order":-1}`, `{"state":"A","order":1.5}`, `{"state":"A","order":}`,
		`{"state":""}`, `{"state":"a\"b"}`, `{"state":"a\\b"}`, `{"state":"\u00c9"}`, `{"state":"É"}`,
		`{"state":"A" }`, `{ "state":"A"}`, `{"state":"A","order":2,"x":1}`, `{"order":1,"state":"A"}`,
		`{"state":"A","state":"B"}`, `{"state":"A"`, `{"state":"A"}}`, `{"state":"tab	"}`, `null`, ``,
	}
	for _, in := range inputs {
		got, err := parseMachineRecord([]byte(in), testJob)
		want, werr := viaJSON([]byte(in))
		if (err != nil) != (werr != nil) || got != want {
			t.Errorf("%s: got %+v %v, encoding/json %+v %v", in, got, err, want, werr)
		}
	}
	for _, r := range []MachineRecord{{State: "PENDING"}, {State: "x y", Order: 7, HasOrder: true}, {State: `q"`}, {State: "É"}} {
		b := r.AppendJSON(nil)
		got, err := parseMachineRecord(b, testJob)
		if err != nil || got != r {
			t.Errorf("%s: %+v %v", b, got, err)
		}
	}
}
