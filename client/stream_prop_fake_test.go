package client_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"pgregory.net/rapid"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/client"
)

// echoWriter is a fake write path (tests named *_Fake*): its answer is a
// function of the entry alone, after a delay that varies with it, so calls
// finish out of order. The first payload byte picks the outcome.
type echoWriter struct {
	api.Writer // not called
	index      atomic.Uint64
}

func (w *echoWriter) delay(p []byte) {
	if len(p) > 0 {
		time.Sleep(time.Duration(sha256.Sum256(p)[0]%2) * time.Millisecond)
	}
}

func (w *echoWriter) Submit(_ context.Context, e api.Entry, _ time.Duration) api.SubmitResult {
	w.delay(e.Payload)
	if len(e.Payload) > 0 {
		switch e.Payload[0] {
		case 'r':
			return api.SubmitResult{Outcome: api.Rejected, ID: e.ID, Reason: fmt.Sprintf("refused %d bytes", len(e.Payload)), Field: "f"}
		case 'x':
			return api.SubmitResult{Outcome: api.Uncertain, ID: e.ID, Reason: "not committed in time"}
		}
	}
	h := sha256.Sum256(e.Payload)
	return api.SubmitResult{Outcome: api.Committed, ID: e.ID, Index: w.index.Add(1), Result: h[:]}
}

func (w *echoWriter) Report(_ context.Context, e api.Entry) (api.ReportResult, error) {
	w.delay(e.Payload)
	if len(e.Payload) > 0 && e.Payload[0] == 'r' {
		return api.ReportResult{}, &api.Error{Outcome: api.Rejected, ID: e.ID, Reason: "bad fact", Field: "g"}
	}
	return api.ReportResult{ID: e.ID, OutboxDepth: uint64(len(e.Payload))}, nil
}

// leaderInfo answers as a leader, so nothing is forwarded.
type leaderInfo struct{ api.Info }

func (leaderInfo) Route(context.Context) api.Route { return api.Route{NodeID: "n1", IsLeader: true} }

// TestStreamAnswersAsUnary_FakeWriter: over a real gRPC server and the
// real client, any mix of concurrent submits and facts — payloads from
// empty to one byte past the API's limit (past 64 KiB the client sends
// them unary), 1 to 300 callers (past the stream's 256 slots), committed,
// rejected and uncertain answers in any order — gets with Config.Stream
// exactly the answer the unary call gets. (UNAVAILABLE's mapping is
// checked in api's TestWriteStream_FakeBackendAnswersEveryCallAsItsUnaryCall;
// here it would make the client go round its endpoint for the whole
// request timeout.)
func TestStreamAnswersAsUnary_FakeWriter(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.44.15:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := api.New(api.Config{Writer: &echoWriter{}, Store: struct{ api.Store }{}, Info: leaderInfo{}})
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	s.Register(g)
	go func() { _ = g.Serve(lis) }()
	defer g.Stop()
	mk := func(stream bool) *client.Client {
		c, err := client.New(client.Config{Endpoints: []string{lis.Addr().String()}, Stream: stream, RequestTimeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	streamed, unary := mk(true), mk(false)
	defer streamed.Close()
	defer unary.Close()
	sizes := []int{0, 1, 255, 2047, 2048, 2049, 4096, 65535, 65536, 1 << 19, api.MaxPayload, api.MaxPayload + 1}

	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 300).Draw(rt, "callers")
		type call struct {
			fact    bool
			id      string
			payload []byte
		}
		calls := make([]call, n)
		budget := 4 << 20
		for i := range calls {
			size := rapid.SampledFrom(sizes).Draw(rt, "size")
			if rapid.IntRange(0, 3).Draw(rt, "small") > 0 || size > budget {
				size = rapid.IntRange(0, 600).Draw(rt, "small size")
			}
			budget -= size
			p := make([]byte, size)
			for j := range p {
				p[j] = byte('a' + (i+j)%26)
			}
			if size > 0 {
				p[0] = rapid.SampledFrom([]byte("crcxc")).Draw(rt, "outcome")
			}
			calls[i] = call{fact: rapid.Bool().Draw(rt, "fact"), id: fmt.Sprintf("p-%d-%s", i, client.NewRequestID()), payload: p}
		}
		do := func(c *client.Client, x call) string {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if x.fact {
				r, err := c.Report(ctx, "t.fact", x.payload, client.WithID(x.id))
				if o, ok := client.OutcomeOf(err); ok {
					return fmt.Sprintf("fact refused %s %s %s", o.Status, o.Field, o.Reason)
				}
				return fmt.Sprintf("fact %s %d %v", r.ID, r.OutboxDepth, err)
			}
			o, _ := c.Submit(ctx, "t.req", x.payload, client.WithID(x.id))
			return fmt.Sprintf("req %s %s %x %s %s", o.RequestID, o.Status, o.Result, o.Field, o.Reason)
		}
		got := make([]string, n)
		var wg sync.WaitGroup
		for i := range calls {
			wg.Add(1)
			go func() { defer wg.Done(); got[i] = do(streamed, calls[i]) }()
		}
		wg.Wait()
		want := make([]string, n)
		sem := make(chan struct{}, 64)
		for i := range calls {
			wg.Add(1)
			sem <- struct{}{}
			go func() { defer wg.Done(); want[i] = do(unary, calls[i]); <-sem }()
		}
		wg.Wait()
		for i, x := range calls {
			if got[i] != want[i] {
				rt.Fatalf("call %d (%d bytes): the stream answered %q, the unary call %q", i, len(x.payload), got[i], want[i])
			}
		}
	})
}
