package client_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/client"
)

// fakeWatchServer serves a fixed event log; with breakAfter > 0 it ends
// every stream with UNAVAILABLE after that many events.
type fakeWatchServer struct {
	writv1.UnimplementedWritServer
	log        []*writv1.WatchEvent
	breakAfter int

	mu    sync.Mutex
	froms []uint64
}

func (s *fakeWatchServer) Watch(r *writv1.WatchRequest, st grpc.ServerStreamingServer[writv1.WatchEvent]) error {
	s.mu.Lock()
	s.froms = append(s.froms, r.FromIndex)
	s.mu.Unlock()
	n := 0
	for _, ev := range s.log {
		if ev.Index < r.FromIndex {
			continue
		}
		if s.breakAfter > 0 && n == s.breakAfter {
			return status.Error(codes.Unavailable, "fake: node going away")
		}
		if err := st.Send(ev); err != nil {
			return err
		}
		n++
	}
	<-st.Context().Done()
	return nil
}

func serveFake(t *testing.T, addr string, s writv1.WritServer) {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	writv1.RegisterWritServer(g, s)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
}

// TestWatchResumeSkipsDeliveredAtSameIndex_FakeServer: events can share a
// log index (a batch). A stream that breaks between two events of one
// index resumes from that index on the next endpoint and skips exactly the
// events already delivered.
func TestWatchResumeSkipsDeliveredAtSameIndex_FakeServer(t *testing.T) {
	log := []*writv1.WatchEvent{{Index: 1, Id: "a"}, {Index: 2, Id: "b"}, {Index: 2, Id: "c"}, {Index: 2, Id: "d"}, {Index: 3, Id: "e"}}
	breaking := &fakeWatchServer{log: log, breakAfter: 3}
	healthy := &fakeWatchServer{log: log}
	serveFake(t, "127.0.44.20:7070", breaking)
	serveFake(t, "127.0.44.21:7070", healthy)
	cl, err := client.New(client.Config{Endpoints: []string{"127.0.44.20:7070", "127.0.44.21:7070"}, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := cl.Watch(ctx, client.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var got string
	for range len(log) {
		ev, err := w.Recv()
		if err != nil {
			t.Fatalf("after %q: %v", got, err)
		}
		got += ev.ID
	}
	if got != "abcde" || w.Resumes() != 1 {
		t.Fatalf("delivered %q with %d resumes, want abcde with 1", got, w.Resumes())
	}
	healthy.mu.Lock()
	defer healthy.mu.Unlock()
	if len(healthy.froms) != 1 || healthy.froms[0] != 2 {
		t.Fatalf("resumed from %v, want from index 2", healthy.froms)
	}
}
