package handler

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

var strs = []string{"", "j-0001", Pending, Ready, Active, "PENDINGX", "ACTIV", "default", "make test", "a<b>&c", "é", "\x00", "bad \xff", `q"uote`, `back\slash`, "\u2028", "tab\there", "\x7f"}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

func randInt(r *rand.Rand) int64 {
	return pick(r, []int64{0, 0, 1, -1, 42, math.MaxInt64, math.MinInt64, r.Int64()})
}

func randUint(r *rand.Rand) uint64 { return pick(r, []uint64{0, 0, 1, math.MaxUint64, r.Uint64()}) }

func randList(r *rand.Rand) []string {
	switch r.IntN(4) {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	out := make([]string, r.IntN(4)+1)
	for i := range out {
		out[i] = pick(r, strs)
	}
	return out
}

func randJob(r *rand.Rand) Job {
	j := Job{JobID: pick(r, strs), Queue: pick(r, strs), Priority: randInt(r), Command: pick(r, strs),
		CPUMillis: randInt(r), MemBytes: randInt(r), State: pick(r, strs), Worker: pick(r, strs), Seq: randUint(r),
		Message: pick(r, strs), Reason: pick(r, strs), PendingReason: pick(r, strs), ReasonSeq: randUint(r), Requeues: int(randInt(r))}
	if r.IntN(2) == 0 {
		v := randInt(r)
		j.ExitCode = &v
	}
	return j
}

func randWorker(r *rand.Rand) Worker {
	w := Worker{WorkerID: pick(r, strs), Capacity: randInt(r), Labels: randList(r), State: pick(r, strs),
		Running: randList(r), Deaths: int(randInt(r)), DetectedBy: pick(r, strs)}
	if r.IntN(2) == 0 {
		w.Usage = &Usage{CPUMillis: randInt(r), MemBytes: randInt(r), Seq: randUint(r)}
	}
	return w
}

// TestDocumentsRoundTrip: every document the handler writes reads back to
// the same value, for random documents with awkward strings (quotes,
// control characters, invalid UTF-8, HTML characters) and extreme numbers.
func TestDocumentsRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		j, w := randJob(r), randWorker(r)
		roundTrip(t, &j)
		roundTrip(t, &w)
		q := Queue{Name: pick(r, strs), State: pick(r, strs)}
		roundTrip(t, &q)
	}
}

func roundTrip[T any](t *testing.T, v *T) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	got := new(T)
	if err := decodeDoc("k", b, got); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	// invalid UTF-8 is written as U+FFFD: compare with what encoding/json
	// itself reads back
	want := new(T)
	if err := json.Unmarshal(b, want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: decoded %+v, want %+v", b, got, want)
	}
}

// TestMalformedDocumentIsAnInternalError: a document that is not JSON of
// the type is an internal error naming the key, never a panic.
func TestMalformedDocumentIsAnInternalError(t *testing.T) {
	for _, doc := range []string{``, `{`, `[]`, `{"priority":"x"}`, `{"state":5}`, "\xff"} {
		var j Job
		err := decodeDoc("job/j1", []byte(doc), &j)
		if err == nil || !strings.Contains(err.Error(), `key "job/j1" holds a malformed document`) {
			t.Errorf("%q: %v", doc, err)
		}
	}
}

func FuzzDecodeDoc(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 20; i++ {
		j, w := randJob(r), randWorker(r)
		bj, _ := json.Marshal(&j)
		bw, _ := json.Marshal(&w)
		f.Add(bj)
		f.Add(bw)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var j Job
		var w Worker
		var q Queue
		var u Usage
		_ = decodeDoc("k", b, &j)
		_ = decodeDoc("k", b, &w)
		_ = decodeDoc("k", b, &q)
		_ = decodeDoc("k", b, &u)
	})
}
