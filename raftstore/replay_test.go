package raftstore

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/writ-dev/writ/kv"
)

// TestReplayStateReapplyAndReopen drives ReplayState over a real bbolt
// file: applying the same batches again, and again after reopening the
// file, leaves the state hash where the first apply put it; a batch at a
// new index with a new command changes it.
func TestReplayStateReapplyAndReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	st, err := OpenReplayState(path)
	if err != nil {
		t.Fatal(err)
	}
	var batches [][]kv.Command
	for i := 0; i < 20; i++ {
		k := "k" + strconv.Itoa(i%5)
		batches = append(batches, []kv.Command{{ID: "c" + strconv.Itoa(i), Type: "t",
			Effect: kv.Effect{Writes: []kv.Write{{Key: k, Value: []byte("v" + strconv.Itoa(i)), Unconditional: true}}}}})
	}
	apply := func() {
		t.Helper()
		for i, b := range batches {
			if _, err := st.Apply(uint64(i+1), b, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	hash := func() [32]byte {
		t.Helper()
		applied, h, err := st.Hash()
		if err != nil {
			t.Fatal(err)
		}
		if applied != uint64(len(batches)) {
			t.Fatalf("applied index %d, want %d", applied, len(batches))
		}
		return h
	}
	apply()
	want := hash()
	apply()
	if got := hash(); got != want {
		t.Fatalf("second apply changed the hash")
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err = OpenReplayState(path); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got := hash(); got != want {
		t.Fatalf("reopening changed the hash")
	}
	apply()
	if got := hash(); got != want {
		t.Fatalf("replay after reopening changed the hash")
	}
	res, err := st.Apply(uint64(len(batches)), []kv.Command{{ID: "new", Type: "t",
		Effect: kv.Effect{Writes: []kv.Write{{Key: "k0", Value: []byte("x"), Unconditional: true}}}}}, nil)
	if err != nil || res[0].Status != kv.StatusApplied {
		t.Fatalf("new command: %v %v", res, err)
	}
	if got := hash(); got == want {
		t.Fatalf("a new command did not change the hash: the comparison cannot fail")
	}
}
