package pipelinetest

import (
	"context"
	"strconv"
	"testing"

	"github.com/writ-dev/writ/kv"
)

// The history Replay reads is bounded like a compacted raft log: recent
// batches replay (decoded from the log's encoding, deduplicated by ID),
// batches older than the retained chunks are gone.
func TestFakeLogHistoryRotates(t *testing.T) {
	l := NewFakeLog()
	ctx := context.Background()
	total := historyChunks*historyChunk + 3*historyChunk/2
	for i := 1; i <= total; i++ {
		k := "k" + strconv.Itoa(i)
		if _, err := l.Propose(ctx, []kv.Command{{ID: k, Type: "t", Guard: []byte{1, 2}, Payload: []byte(`{"i":1}`),
			Effect: kv.Effect{Writes: []kv.Write{{Key: k, Value: []byte("v" + k)}}}}}); err != nil {
			t.Fatal(err)
		}
		if !l.CommitNext() {
			t.Fatalf("batch %d not committed", i)
		}
	}
	if res := l.Replay(1); res != nil {
		t.Fatalf("index 1 replayed after %d batches: %+v", total, res)
	}
	oldest := uint64(total - (historyChunks-1)*historyChunk) // at least this much history is kept
	for _, idx := range []uint64{oldest, uint64(total - 1), uint64(total)} {
		res := l.Replay(idx)
		if len(res) != 1 || res[0].Status != kv.StatusDuplicate || res[0].FirstIndex != idx {
			t.Fatalf("replay %d: %+v", idx, res)
		}
		cmds, ok, err := l.committed.at(idx)
		k := "k" + strconv.FormatUint(idx, 10)
		if err != nil || !ok || len(cmds) != 1 || cmds[0].ID != k || string(cmds[0].Effect.Writes[0].Value) != "v"+k ||
			string(cmds[0].Payload) != `{"i":1}` {
			t.Fatalf("history %d: %+v %v %v", idx, cmds, ok, err)
		}
	}
	if res := l.Replay(uint64(total + 1)); res != nil {
		t.Fatalf("uncommitted index replayed: %+v", res)
	}
	if rec, ok, _ := l.Get(ctx, "k1", false); !ok || string(rec.Value) != "vk1" || rec.Rev != 1 {
		t.Fatalf("state of k1: %+v %v", rec, ok)
	}
}

// A proposal's Wait returns its results whether it is called before or
// after the batch commits, and reports a lost batch.
func TestFakeProposalWait(t *testing.T) {
	l := NewFakeLog()
	ctx := context.Background()
	put := func(k string) []kv.Command {
		return []kv.Command{{ID: k, Effect: kv.Effect{Writes: []kv.Write{{Key: k, Value: []byte("v")}}}}}
	}
	early, _ := l.Propose(ctx, put("a"))
	got := make(chan []kv.Result, 1)
	go func() {
		res, err := early.Wait(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- res
	}()
	late, _ := l.Propose(ctx, append(put("b"), put("c")...))
	lost, _ := l.Propose(ctx, put("d"))
	l.CommitNext()
	l.CommitNext()
	if res := <-got; len(res) != 1 || res[0].Status != kv.StatusApplied || res[0].Index != 1 {
		t.Fatalf("waited before commit: %+v", res)
	}
	if res, err := late.Wait(ctx); err != nil || len(res) != 2 || res[1].Status != kv.StatusApplied || res[1].Index != 2 {
		t.Fatalf("waited after commit: %+v %v", res, err)
	}
	l.Lose()
	if _, err := lost.Wait(ctx); err == nil {
		t.Fatal("lost batch reported no error")
	}
}
