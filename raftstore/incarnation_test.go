package raftstore

import (
	"reflect"
	"testing"
)

func TestWALMetadataNamesNodeAndIncarnation(t *testing.T) {
	id, inc, err := decodeWALMetadata(encodeWALMetadata("n1", 0xabc))
	if err != nil || id != "n1" || inc != 0xabc {
		t.Fatalf("round trip: %q %x %v", id, inc, err)
	}
	// A WAL written before incarnations holds the node ID alone.
	if id, inc, err := decodeWALMetadata([]byte("n1")); err != nil || id != "n1" || inc != 0 {
		t.Fatalf("legacy metadata: %q %x %v", id, inc, err)
	}
	for _, bad := range []string{"n1\x00", "n1\x00zz", "n1\x000000000000000000"} {
		if _, _, err := decodeWALMetadata([]byte(bad)); err == nil {
			t.Errorf("metadata %q decoded", bad)
		}
	}
	if _, err := (&Config{NodeID: "n\x001", DataDir: "d", RaftAddr: "a:1"}).withDefaults(); err == nil {
		t.Error("a node ID with a NUL byte was accepted")
	}
}

func TestMemberContextCarriesTheIncarnation(t *testing.T) {
	b := encodeMemberContextInc("n1", "127.0.98.1:7000", 0x1234)
	// What an older version reads.
	if id, addr, err := decodeMemberContext(b); err != nil || id != "n1" || addr != "127.0.98.1:7000" {
		t.Fatalf("context read without the incarnation: %q %q %v", id, addr, err)
	}
	if _, _, inc, err := decodeMemberContextInc(b); err != nil || inc != 0x1234 {
		t.Fatalf("incarnation: %x %v", inc, err)
	}
	if _, _, inc, err := decodeMemberContextInc(encodeMemberContext("n1", "a:1")); err != nil || inc != 0 {
		t.Fatalf("context without an incarnation: %x %v", inc, err)
	}
	if _, _, _, err := decodeMemberContextInc(append(encodeMemberContext("n1", "a:1"), 0x80)); err == nil {
		t.Fatal("a truncated incarnation decoded")
	}
	m := map[uint64]memberInfo{3: {ID: "c", Addr: "x:1", Learner: true, Inc: 7}, 1: {ID: "a", Addr: "y:2"}, 9: {ID: "b", Addr: "z:3", Inc: 1 << 63}}
	enc := encodeMembers(m)
	got, err := decodeMembers(enc)
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("members round trip: %+v %v", got, err)
	}
	// An older version reads the members and stops before the incarnations.
	legacy := map[uint64]memberInfo{}
	for id, mi := range m {
		mi.Inc = 0
		legacy[id] = mi
	}
	if n := len(encodeMembers(legacy)); n >= len(enc) || !reflect.DeepEqual(enc[:n], encodeMembers(legacy)) {
		t.Fatal("the incarnations are not a suffix after the members an older version reads")
	}
}

func TestOnlyARemovalOfThisIncarnationRemovesThisNode(t *testing.T) {
	for _, c := range []struct {
		own, removed uint64
		want         bool
	}{
		{own: 5, removed: 5, want: true},
		{own: 5, removed: 4, want: false}, // a predecessor's removal
		{own: 5, removed: 0, want: true},  // the removal names none: as before incarnations
		{own: 0, removed: 4, want: true},  // this node has none (an older WAL)
	} {
		if got := (&Node{inc: c.own}).removesThisNode(c.removed); got != c.want {
			t.Errorf("own %x, removal of %x: removes this node %v, want %v", c.own, c.removed, got, c.want)
		}
	}
}

// FuzzDecodeMemberContextInc: a conf change context from the log never
// panics the applier, and whatever decodes re-encodes to a context that
// decodes the same (and that an older version reads the same ID and
// address from).
func FuzzDecodeMemberContextInc(f *testing.F) {
	f.Add(encodeMemberContextInc("n1", "127.0.98.1:7000", 0x1234))
	f.Add(encodeMemberContext("n1", "a:1"))
	f.Add(append(encodeMemberContext("n1", "a:1"), 0x80))
	f.Add(append(encodeMemberContextInc("n1", "a:1", 1<<63), 9, 9))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		id, addr, inc, err := decodeMemberContextInc(in)
		if err != nil {
			return
		}
		enc := encodeMemberContextInc(id, addr, inc)
		id2, addr2, inc2, err := decodeMemberContextInc(enc)
		if err != nil || id2 != id || addr2 != addr || inc2 != inc {
			t.Fatalf("re-encode mismatch: %q %q %x, then %q %q %x %v", id, addr, inc, id2, addr2, inc2, err)
		}
		if id3, addr3, err := decodeMemberContext(enc); err != nil || id3 != id || addr3 != addr {
			t.Fatalf("read without the incarnation: %q %q %v", id3, addr3, err)
		}
	})
}

// FuzzDecodeMembers: a member table from state.db or a snapshot never
// panics the decoder, and whatever decodes re-encodes to a table that
// decodes the same, incarnations included.
func FuzzDecodeMembers(f *testing.F) {
	f.Add(encodeMembers(map[uint64]memberInfo{3: {ID: "c", Addr: "x:1", Learner: true, Inc: 7}, 1: {ID: "a", Addr: "y:2"}}))
	f.Add(encodeMembers(map[uint64]memberInfo{1: {ID: "a", Addr: "y:2"}}))
	f.Add(append(encodeMembers(map[uint64]memberInfo{1: {ID: "a", Addr: "y:2"}}), 1, 1))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := decodeMembers(in)
		if err != nil {
			if m != nil {
				t.Fatalf("a table with the error %v", err)
			}
			return
		}
		got, err := decodeMembers(encodeMembers(m))
		if err != nil || !reflect.DeepEqual(got, m) {
			t.Fatalf("re-encode mismatch: %+v, then %+v %v", m, got, err)
		}
	})
}
