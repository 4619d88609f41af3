package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/writ-dev/writ/api/writv1"
)

// submitJobs commits a queue and n jobs on p and returns the request IDs
// with the index each committed at.
func submitJobs(t *testing.T, p *proc, queue string, n int) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	r, err := submit(p, "queue.control", fmt.Sprintf(`{"queue":%q,"action":"create"}`, queue), 5*time.Second)
	if err != nil || r.Outcome != writv1.Outcome_COMMITTED {
		t.Fatalf("create queue: %v %v", r, err)
	}
	out["req:"+r.RequestId] = r.Index
	for i := range n {
		r, err := submit(p, "job.submit", fmt.Sprintf(`{"job_id":"%s-%d","queue":%q,"priority":1,"command":"x"}`, queue, i, queue), 5*time.Second)
		if err != nil || r.Outcome != writv1.Outcome_COMMITTED {
			t.Fatalf("submit %d: %v %v", i, r, err)
		}
		out["req:"+r.RequestId] = r.Index
	}
	return out
}

// watchUntil watches p from index from until every ID in want was seen
// (bounded by d) and returns the events in arrival order, or the stream's
// error.
func watchUntil(p *proc, from uint64, want map[string]uint64, d time.Duration) ([]*writv1.WatchEvent, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	ws, err := p.client.Watch(ctx, &writv1.WatchRequest{FromIndex: from})
	if err != nil {
		return nil, err
	}
	var evs []*writv1.WatchEvent
	left := len(want)
	for left > 0 {
		ev, err := ws.Recv()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
		if _, ok := want[ev.Id]; ok {
			left--
		}
	}
	return evs, nil
}

// checkFeed: every wanted request appears once, at its committed index,
// and indexes never go backwards.
func checkFeed(t *testing.T, evs []*writv1.WatchEvent, want map[string]uint64) {
	t.Helper()
	seen := map[string]bool{}
	var last uint64
	for _, ev := range evs {
		if ev.Index < last {
			t.Fatalf("watch went back from index %d to %d (%s)", last, ev.Index, ev.Id)
		}
		last = ev.Index
		if idx, ok := want[ev.Id]; ok {
			if seen[ev.Id] {
				t.Fatalf("%s seen twice on the watch", ev.Id)
			}
			seen[ev.Id] = true
			if ev.Index != idx || (ev.Status != "apply" && ev.Status != "applied") {
				t.Fatalf("%s on the watch at index %d status %q; it committed at %d", ev.Id, ev.Index, ev.Status, idx)
			}
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("watch showed %d of %d committed requests", len(seen), len(want))
	}
}

// TestCluster_WatchResumesAcrossRestart (issue 15, item 7): after a node
// restarts, a watch from index 1 on it returns every event its log still
// holds, in order, read back from the WAL — not "compacted" for every
// index before the restart. Three real writd processes on 127.0.41.11–13;
// a follower and then the leader restart.
func TestCluster_WatchResumesAcrossRestart(t *testing.T) {
	c := newCluster(t, "127.0.41.11", "127.0.41.12", "127.0.41.13")
	l := c.leader(20 * time.Second)
	want := submitJobs(t, l, "wq", 20)
	c.converge(40 * time.Second)
	follower := c.nodes[2]
	if follower == l {
		follower = c.nodes[1]
	}
	for _, p := range []*proc{follower, l} {
		// the feed as the node served it live, from its ring
		live, err := watchUntil(p, 1, want, 20*time.Second)
		if err != nil {
			t.Fatalf("watch from 1 on %s before the restart: %v", p.name, err)
		}
		checkFeed(t, live, want)
		c.stop(p)
		c.start(p)
		c.waitReady(p, 40*time.Second)
		c.converge(40 * time.Second)
		evs, err := watchUntil(p, 1, want, 20*time.Second)
		if err != nil {
			t.Fatalf("watch from 1 on restarted %s: %v (got %d events)", p.name, err, len(evs))
		}
		checkFeed(t, evs, want)
		if len(evs) < len(live) {
			t.Fatalf("%s after restart: %d events, %d before", p.name, len(evs), len(live))
		}
		for i, a := range live {
			b := evs[i]
			if a.Index != b.Index || a.Id != b.Id || a.Type != b.Type || a.Key != b.Key || a.Status != b.Status || a.Class != b.Class {
				t.Fatalf("%s event %d differs after restart:\nlive   %v\nreplay %v", p.name, i, a, b)
			}
		}
		c.leader(20 * time.Second)
	}
}

// TestCluster_WatchCompactedNamesFirstIndex: once a snapshot and the
// restart drop the entries before it, a watch from 1 answers OUT_OF_RANGE
// "compacted: re-list state and watch from index N" (not UNAVAILABLE), and
// a watch from N serves every committed request from N on. One real writd
// on 127.0.41.21 taking a snapshot every 10 entries.
func TestCluster_WatchCompactedNamesFirstIndex(t *testing.T) {
	c := newClusterArgs(t, []string{"--raft-snapshot-entries", "10"}, "127.0.41.21")
	p := c.nodes[0]
	all := submitJobs(t, p, "cq", 25)
	c.stop(p)
	c.start(p)
	c.waitReady(p, 40*time.Second)
	_, err := watchUntil(p, 1, all, 10*time.Second)
	st, _ := status.FromError(err)
	if st.Code() != codes.OutOfRange || !strings.HasPrefix(st.Message(), "compacted: re-list state and watch from index ") {
		t.Fatalf("watch from 1 after compaction: %v; want OutOfRange \"compacted: re-list state and watch from index N\"", err)
	}
	var first uint64
	if _, err := fmt.Sscanf(st.Message(), "compacted: re-list state and watch from index %d", &first); err != nil || first <= 1 {
		t.Fatalf("no index N > 1 in %q: %v", st.Message(), err)
	}
	want := map[string]uint64{}
	for id, idx := range all {
		if idx >= first {
			want[id] = idx
		}
	}
	if len(want) == 0 || len(want) == len(all) {
		t.Fatalf("first available index %d leaves %d of %d requests: the snapshot did not cut the log", first, len(want), len(all))
	}
	evs, err := watchUntil(p, first, want, 20*time.Second)
	if err != nil {
		t.Fatalf("watch from %d: %v", first, err)
	}
	checkFeed(t, evs, want)
}
