package raftstore

import (
	"reflect"
	"strings"
	"testing"

	"github.com/writ-dev/writ/kv"
)

// FuzzDecodeEnvelope: entry data from the log never panics the applier, and
// whatever decodes re-encodes to a batch that decodes the same.
func FuzzDecodeEnvelope(f *testing.F) {
	f.Add(encodeEnvelope(7, 99, []kv.Command{put("a", "k", "v")}))
	f.Add([]byte{1, 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		o, r, cmds, err := decodeEnvelope(in)
		if err != nil {
			return
		}
		o2, r2, cmds2, err := decodeEnvelope(encodeEnvelope(o, r, cmds))
		if err != nil || o2 != o || r2 != r || !reflect.DeepEqual(cmds, cmds2) {
			t.Fatalf("re-encode mismatch: %v", err)
		}
	})
}

func TestMemberContextRoundTrip(t *testing.T) {
	id, addr, err := decodeMemberContext(encodeMemberContext("n1", "127.0.1.1:7000"))
	if err != nil || id != "n1" || addr != "127.0.1.1:7000" {
		t.Fatalf("%q %q %v", id, addr, err)
	}
	if _, _, err := decodeMemberContext([]byte{9}); err == nil {
		t.Fatal("bad context decoded")
	}
	m := map[uint64]memberInfo{3: {ID: "c", Addr: "x:1", Learner: true}, 1: {ID: "a", Addr: "y:2"}}
	got, err := decodeMembers(encodeMembers(m))
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("members round trip: %v %v", got, err)
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	cases := map[string]Config{
		"NodeID":   {},
		"DataDir":  {NodeID: "n1"},
		"RaftAddr": {NodeID: "n1", DataDir: "/tmp/x"},
		"Peers":    {NodeID: "n1", DataDir: "/tmp/x", RaftAddr: "127.0.1.1:0", Peers: []Peer{{ID: "n2", Addr: "a:1"}}},
		"Join":     {NodeID: "n1", DataDir: "/tmp/x", RaftAddr: "127.0.1.1:0", Join: true, Peers: []Peer{{ID: "n1", Addr: "a:1"}}},
	}
	for field, cfg := range cases {
		_, err := cfg.withDefaults()
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: error %v does not name the field", field, err)
		}
	}
}

func TestEnvelopeEncodesWithinItsSizeHint(t *testing.T) {
	cmds := []kv.Command{
		{ID: "id", Type: "t", Key: "k", Guard: []byte("g"), Payload: []byte("p"), Origin: "o",
			Effect: kv.Effect{Writes: []kv.Write{{Key: "a", Value: make([]byte, 300), IfRev: 1 << 62}, {Key: "b", Delete: true}}}},
		{ID: string(make([]byte, 200))},
	}
	b := encodeEnvelope(1<<63, 1<<63, cmds)
	if hint := envelopeSizeHint(cmds); len(b) > hint || cap(b) != hint {
		t.Fatalf("encoded %d bytes (cap %d), hint %d: the buffer grew", len(b), cap(b), hint)
	}
}
