package raftstore

import (
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

func app(to, term, index, logTerm, commit uint64, ents ...uint64) *raftpb.Message {
	m := &raftpb.Message{Type: new(raftpb.MsgApp), To: new(to), From: new(uint64(1)), Term: new(term),
		Index: new(index), LogTerm: new(logTerm), Commit: new(commit)}
	for _, i := range ents {
		m.Entries = append(m.Entries, &raftpb.Entry{Index: new(i), Term: new(term), Data: []byte("x")})
	}
	return m
}

func appResp(to, term, index uint64, reject bool) *raftpb.Message {
	return &raftpb.Message{Type: new(raftpb.MsgAppResp), To: new(to), From: new(uint64(1)), Term: new(term),
		Index: new(index), Reject: new(reject)}
}

func TestCoalesceMergesWhatTheLastMessageImplies(t *testing.T) {
	a1 := app(2, 5, 10, 5, 9, 11)
	a2 := app(2, 5, 11, 5, 10, 12)
	b1 := app(3, 5, 10, 5, 9, 11)
	hb := &raftpb.Message{Type: new(raftpb.MsgHeartbeat), To: new(uint64(3)), Term: new(uint64(5))}
	b2 := app(3, 5, 11, 5, 10, 12)
	a3 := app(2, 5, 12, 5, 11, 13, 14)
	gap := app(2, 5, 20, 5, 11, 21) // not contiguous: kept apart
	in := []*raftpb.Message{a1, b1, a2, hb, b2, a3, gap}
	a1Ents := a1.Entries
	out := coalesce(append([]*raftpb.Message(nil), in...), 1<<20)
	if len(out) != 5 {
		t.Fatalf("got %d messages, want 5: %v", len(out), out)
	}
	m := out[0]
	if m.GetTo() != 2 || m.GetIndex() != 10 || m.GetLogTerm() != 5 || m.GetCommit() != 11 || len(m.GetEntries()) != 4 ||
		m.GetEntries()[0].GetIndex() != 11 || m.GetEntries()[3].GetIndex() != 14 {
		t.Fatalf("merged append to 2: %v", m)
	}
	if len(a1.Entries) != 1 || &a1Ents[0] != &a1.Entries[0] || a1.GetCommit() != 9 {
		t.Fatal("raft's message was modified")
	}
	// Peer 3: the heartbeat between its appends keeps them apart, in order.
	if out[1] != b1 || out[2] != hb || out[3] != b2 || out[4] != gap {
		t.Fatalf("order or content changed: %v", out)
	}
	// Size bound.
	if got := coalesce([]*raftpb.Message{app(2, 5, 10, 5, 9, 11), app(2, 5, 11, 5, 10, 12)}, 30); len(got) != 2 {
		t.Fatalf("merged beyond the size bound: %v", got)
	}
	// Different terms are not merged.
	if got := coalesce([]*raftpb.Message{app(2, 5, 10, 5, 9, 11), app(2, 6, 11, 5, 10, 12)}, 1<<20); len(got) != 2 {
		t.Fatalf("merged across terms: %v", got)
	}
}

func TestCoalesceKeepsRejectionsAndTheHighestAck(t *testing.T) {
	r1, r2, rej, r3 := appResp(1, 5, 7, false), appResp(1, 5, 9, false), appResp(1, 5, 3, true), appResp(1, 5, 12, false)
	out := coalesce([]*raftpb.Message{r1, r2, rej, r3}, 1<<20)
	if len(out) != 3 || out[0] != r2 || out[1] != rej || out[2] != r3 {
		t.Fatalf("got %v", out)
	}
	// A lower ack never replaces a higher one; other terms stay.
	out = coalesce([]*raftpb.Message{appResp(1, 5, 9, false), appResp(1, 5, 7, false), appResp(1, 6, 10, false)}, 1<<20)
	if len(out) != 3 {
		t.Fatalf("got %v", out)
	}
}
