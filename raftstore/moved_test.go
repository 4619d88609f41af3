package raftstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/writ-dev/writ/kv"
)

// movedChecker refuses commands of type "test.stale" as evaluated against
// state that has moved since (kv.ErrMoved), and "test.veto" as a guard
// veto.
type movedChecker struct{}

func (movedChecker) Check(cmd *kv.Command, _ kv.Reader) error {
	switch cmd.Type {
	case "test.stale":
		return fmt.Errorf("guard: job/x moved (rev 9, evaluated at 3): %w", kv.ErrMoved)
	case "test.veto":
		return fmt.Errorf("guard: illegal transition")
	}
	return nil
}

// TestCheckerMovedIsAConflictNotARejection: a command the apply-time
// checker refuses because the state it was evaluated against moved is
// recorded as a conflict, over a real node (WAL, bbolt): it changed
// nothing and is not a decision, so the outcome table does not answer it
// REJECTED, the proposer's retry under the same ID applies, and the log
// read back (the watch stream's source after a restart) shows the first
// attempt as a conflict — one application, never a rejection followed by
// an application. A veto for any other reason stays a rejection.
func TestCheckerMovedIsAConflictNotARejection(t *testing.T) {
	c := newCluster(t, 1, func(_ int, cfg *Config) { cfg.Checker = movedChecker{} })
	n := c.nodes[c.leader(10*time.Second)]
	stale := kv.Command{ID: "fact:f1", Type: "test.stale", Effect: kv.Effect{Writes: []kv.Write{{Key: "job/x", Value: []byte("v"), Unconditional: true}}}}
	r1 := mustPropose(t, n, stale)
	if r1[0].Status != kv.StatusConflict {
		t.Fatalf("moved refusal recorded as %v (%q), want conflict", r1[0].Status, r1[0].Reason)
	}
	if o, ok := n.Outcome("fact:f1"); !ok || o.Status != kv.StatusConflict {
		t.Fatalf("outcome table after a moved refusal: %+v %v, want a conflict record", o, ok)
	}
	retry := stale
	retry.Type = "test.put"
	r2 := mustPropose(t, n, retry)
	if r2[0].Status != kv.StatusApplied {
		t.Fatalf("retry after a moved refusal: %v (%q), want applied", r2[0].Status, r2[0].Reason)
	}
	veto := mustPropose(t, n, kv.Command{ID: "req:v", Type: "test.veto", Effect: kv.Effect{Writes: []kv.Write{{Key: "job/y", Value: []byte("v"), Unconditional: true}}}})
	if veto[0].Status != kv.StatusRejected {
		t.Fatalf("guard veto recorded as %v, want rejected", veto[0].Status)
	}
	ents, _, _, err := n.ReadApplied(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		for i, cmd := range e.Commands {
			if cmd.ID == "fact:f1" {
				got = append(got, fmt.Sprintf("%d:%v", e.Index, e.Results[i].Status))
			}
		}
	}
	want := []string{fmt.Sprintf("%d:%v", r1[0].Index, kv.StatusConflict), fmt.Sprintf("%d:%v", r2[0].Index, kv.StatusApplied)}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("fact:f1 read back from the log: %v, want %v", got, want)
	}
}
