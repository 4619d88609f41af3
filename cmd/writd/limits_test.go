package main

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/writ-dev/writ/api/writv1"
)

// openWatch opens a Watch on cl and returns the status it was refused
// with (nil: it is open and stays open until ctx ends).
func openWatch(t *testing.T, ctx context.Context, cl writv1.WritClient) error {
	t.Helper()
	w, err := cl.Watch(ctx, &writv1.WatchRequest{FromIndex: 1})
	if err != nil {
		return err
	}
	got := make(chan error, 1)
	go func() { _, err := w.Recv(); got <- err }()
	select {
	case err := <-got:
		if status.Code(err) == codes.ResourceExhausted {
			return err
		}
		return nil // an event: the watch is open
	case <-time.After(time.Second):
		return nil // open, no event yet
	}
}

// TestAPILimitsRealProcess: one real writd with small API limits. A watch
// over the per-connection and the node-wide bound is refused
// ResourceExhausted naming the key, and the refusal is logged; a client
// pinging faster than api.keepalive_min_time is sent GOAWAY
// ENHANCE_YOUR_CALM "too_many_pings"; a connection over
// api.max_connections waits (its call times out), the limit is logged,
// and it is served once another closes. Throughout, the node keeps
// serving the clients within the limits.
func TestAPILimitsRealProcess(t *testing.T) {
	bin := buildBinaries(t)
	c := &cluster{t: t, bin: bin, args: []string{"--api-max-watchers", "2", "--api-max-watchers-per-conn", "1",
		"--api-max-connections", "4", "--api-keepalive-min-time", "5s"}}
	t.Cleanup(c.stopAll)
	n := &proc{t: t, name: "n1", host: "127.0.16.175", dir: filepath.Join(t.TempDir(), "n1")}
	c.nodes = append(c.nodes, n)
	c.start(n)
	c.waitReady(n, 20*time.Second)
	serving := func(what string) {
		t.Helper()
		if r, err := submit(n, "queue.control", `{"queue":"q","action":"create"}`, 5*time.Second); err != nil || r.Outcome.String() != "COMMITTED" {
			t.Fatalf("%s: the node stopped serving: %v %v", what, r, err)
		}
	}
	conns := map[writv1.WritClient]*grpc.ClientConn{}
	dial := func() writv1.WritClient {
		cc, err := grpc.NewClient(n.api(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cc.Close() })
		cl := writv1.NewWritClient(cc)
		conns[cl] = cc
		return cl
	}

	// Keepalive: pings faster than 5s on a raw HTTP/2 connection.
	raw, err := net.DialTimeout("tcp", n.api(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := raw.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(raw, raw)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	// the Framer is not safe for concurrent writes: the pinger and the
	// settings ack below take turns
	var wmu sync.Mutex
	go func() {
		for i := 0; i < 10; i++ {
			wmu.Lock()
			err := fr.WritePing(false, [8]byte{byte(i)})
			wmu.Unlock()
			if err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	var away *http2.GoAwayFrame
	for away == nil {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("pinging every 20ms: no GOAWAY before %v", err)
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			away = g
		} else if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
			wmu.Lock()
			_ = fr.WriteSettingsAck()
			wmu.Unlock()
		}
	}
	if away.ErrCode != http2.ErrCodeEnhanceYourCalm || string(away.DebugData()) != "too_many_pings" {
		t.Fatalf("GOAWAY %v %q, want ENHANCE_YOUR_CALM too_many_pings", away.ErrCode, away.DebugData())
	}
	_ = raw.Close()
	serving("after the fast pinger")

	time.Sleep(500 * time.Millisecond) // the pinger's connection is released

	// Watches: 1 per connection, 2 on the node.
	wctx, wcancel := context.WithCancel(context.Background())
	a, b, third := dial(), dial(), dial()
	if err := openWatch(t, wctx, a); err != nil {
		t.Fatalf("first watch: %v", err)
	}
	wantCode(t, "second watch on one connection", openWatch(t, wctx, a), codes.ResourceExhausted, "api.max_watchers_per_conn")
	waitLog(t, n, 5*time.Second, "api: watch refused", "limit=api.max_watchers_per_conn", "max=1")
	if err := openWatch(t, wctx, b); err != nil {
		t.Fatalf("watch on a second connection: %v", err)
	}
	time.Sleep(1100 * time.Millisecond) // refusal lines are rate-limited to one a second
	wantCode(t, "third watch on the node", openWatch(t, wctx, third), codes.ResourceExhausted, "api.max_watchers")
	waitLog(t, n, 5*time.Second, "api: watch refused", "limit=api.max_watchers ", "max=2")
	serving("after refused watches")
	wcancel()

	// Connections: the harness's, a's, b's and third's hold 4 of 4.
	over := dial()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, err = over.Status(ctx, &writv1.StatusRequest{})
	cancel()
	if status.Code(err) != codes.DeadlineExceeded && status.Code(err) != codes.Unavailable {
		t.Fatalf("a fifth connection over api.max_connections 4: got %v, want it to wait (DeadlineExceeded)", err)
	}
	waitLog(t, n, 5*time.Second, "api: connection limit reached", "limit=api.max_connections", "max=4")
	serving("at the connection limit")
	// Closing one lets the waiting client in.
	_ = conns[third].Close()
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := over.Status(ctx, &writv1.StatusRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("after a connection closed, the waiting client is still not served: %v", err)
	}
	waitLog(t, n, 5*time.Second, "api: below the connection limit again")
}
