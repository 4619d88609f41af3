package handler

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
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

// TestDocumentsEncodeLikeEncodingJSON: the handler's encoders write the
// bytes json.Marshal writes, and its decoders read them (and anything
// json.Unmarshal reads) back to the value json.Unmarshal yields.
func TestDocumentsEncodeLikeEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 5000; i++ {
		j, w := randJob(r), randWorker(r)
		q := Queue{Name: pick(r, strs), State: pick(r, strs)}
		res := Result{JobID: pick(r, strs), Queue: pick(r, strs), WorkerID: pick(r, strs), State: pick(r, strs), Capacity: randInt(r), Running: int(randInt(r))}
		checkEncode(t, &j, j.appendJSON(nil))
		checkEncode(t, &w, w.appendJSON(nil))
		checkEncode(t, &q, q.appendJSON(nil))
		checkEncode(t, &res, res.appendJSON(nil))
		checkDecode(t, j.appendJSON(nil), fastJob)
		checkDecode(t, w.appendJSON(nil), fastWorker)
		checkDecode(t, q.appendJSON(nil), fastQueue)
	}
}

func checkEncode(t *testing.T, v any, got []byte) {
	t.Helper()
	want, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%#v:\nhandler encodes %s\njson encodes    %s", v, got, want)
	}
}

// checkDecode: where the fast decoder takes a document, it yields what
// json.Unmarshal yields into a zero value (and json accepts the document).
func checkDecode[T any](t *testing.T, b []byte, fast func(*T, []byte) bool) bool {
	t.Helper()
	var got, want T
	if !fast(&got, b) {
		return false
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatalf("%q: fast decoder accepts what json refuses: %v", b, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: fast decoder %#v, json %#v", b, got, want)
	}
	return true
}

func TestFastDecodersLeaveOtherFormsToEncodingJSON(t *testing.T) {
	for _, doc := range []string{
		`{"job_id":"j","queue":"q","priority":5,"command":"x","state":"PENDING"}`,
		`{}`,
		` {"job_id":"j"}`, `{"job_id" :"j"}`, `{"job_id":"j",}`, `{,"job_id":"j"}`, `,"job_id":"j"}`,
		`{"Job_ID":"j"}`, `{"job_id":"j","job_id":"k"}`, `{"job_id":null}`, `{"job_id":"\u006a"}`, `{"job_id":"é"}`,
		`{"priority":1e3}`, `{"priority":1.0}`, `{"priority":01}`, `{"priority":-0}`, `{"seq":-0}`, `{"seq":-1}`,
		`{"priority":99999999999999999999}`, `{"colour":1}`, `{"":1}`, `{"job_id":"j"}x`, `{"job_id":"j"`, `{}}`,
		`{"exit_code":0}`, `{"requeues":3}`,
	} {
		if checkDecode(t, []byte(doc), fastJob) != (doc == `{"job_id":"j","queue":"q","priority":5,"command":"x","state":"PENDING"}` || doc == `{}` || doc == `{"priority":-0}` || doc == `{"exit_code":0}` || doc == `{"requeues":3}`) {
			t.Errorf("%s: fast path taken or refused unexpectedly", doc)
		}
	}
	for _, doc := range []string{
		`{"worker_id":"w","capacity":4,"state":"READY","running":[]}`,
		`{"worker_id":"w","capacity":4,"labels":["a","b"],"state":"READY","running":["j1"],"usage":{"cpu_millis":1,"mem_bytes":2,"seq":3},"deaths":1,"detected_by":"d"}`,
		`{"running":null}`, `{"running":[,]}`, `{"running":["a",]}`, `{"running":["a" ]}`, `{"usage":{"cpu_millis":1}`,
		`{"usage":{"cpu_millis":1,"x":2}}`, `{"usage":null}`, `{"labels":[1]}`,
	} {
		checkDecode(t, []byte(doc), fastWorker)
	}
}

func FuzzFastDecoders(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 20; i++ {
		j, w := randJob(r), randWorker(r)
		f.Add(j.appendJSON(nil))
		f.Add(w.appendJSON(nil))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDecode(t, b, fastJob)
		checkDecode(t, b, fastWorker)
		checkDecode(t, b, fastQueue)
		checkDecode(t, b, fastUsage)
	})
}
