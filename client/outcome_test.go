package client

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/writ-dev/writ/api/writv1"
)

func TestStatusOfWireOutcomes(t *testing.T) {
	for w, want := range map[writv1.Outcome]Status{
		writv1.Outcome_COMMITTED:           Committed,
		writv1.Outcome_REJECTED:            Rejected,
		writv1.Outcome_UNAVAILABLE:         Unavailable,
		writv1.Outcome_UNCERTAIN:           Uncertain,
		writv1.Outcome_OUTCOME_UNSPECIFIED: Uncertain,
		writv1.Outcome(99):                 Uncertain, // unknown to this client: look it up
	} {
		if got := statusOf(w); got != want {
			t.Errorf("statusOf(%v) = %v, want %v", w, got, want)
		}
	}
	if Uncertain.Definite() || !NotCommitted.Definite() || NotCommitted.String() != "NOT_COMMITTED" {
		t.Fatal("Uncertain must be the only status that is not definite")
	}
}

// TestSettleNeverTurnsMaybeIntoDefinitelyNot: once an attempt may have
// left, no later answer of "unavailable" (from a server or a dead
// endpoint) may make the outcome definite.
func TestSettleNeverTurnsMaybeIntoDefinitelyNot(t *testing.T) {
	unavailable, _ := status.New(codes.Unavailable, "no leader").WithDetails(&writv1.OutcomeDetail{Outcome: writv1.Outcome_UNAVAILABLE, Reason: "no leader"})
	for name, c := range map[string]struct {
		t    tries
		want Status
	}{
		"server unavailable":                  {tries{err: unavailable.Err()}, Unavailable},
		"server unavailable after a lost one": {tries{err: unavailable.Err(), maybe: true}, Uncertain},
		"refused, never sent":                 {tries{err: status.Error(codes.Unavailable, "connection refused")}, Unavailable},
		"deadline after sending":              {tries{err: status.Error(codes.DeadlineExceeded, "deadline"), maybe: true}, Uncertain},
		"no attempt ran":                      {tries{}, Unavailable},
		"overloaded":                          {tries{err: status.Error(codes.ResourceExhausted, "overloaded: retry after 1s")}, Unavailable},
		"too large":                           {tries{err: status.Error(codes.ResourceExhausted, "grpc: received message larger than max")}, Rejected},
		"unauthenticated":                     {tries{err: status.Error(codes.Unauthenticated, "token")}, Rejected},
	} {
		o, err := (&Client{}).settle(c.t, "r-1")
		got, ok := OutcomeOf(err)
		if !ok || o.Status != c.want || got.Status != c.want || o.RequestID != "r-1" {
			t.Errorf("%s: outcome %+v (error %v), want %v for r-1", name, o, err, c.want)
		}
		if c.t.err != nil && !errors.Is(err, c.t.err) {
			t.Errorf("%s: the error does not wrap the last attempt's error", name)
		}
	}
}

func TestNewRequestID(t *testing.T) {
	a, b := NewRequestID(), NewRequestID()
	if a == b || len(a) != len(RequestIDPrefix)+32 || a[:2] != RequestIDPrefix {
		t.Fatalf("NewRequestID: %q %q", a, b)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no endpoints":      {},
		"an empty endpoint": {Endpoints: []string{"127.0.44.1:7070", " "}},
		"token in plain":    {Endpoints: []string{"127.0.44.1:7070"}, Token: "t"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
	c, err := New(Config{Endpoints: []string{"127.0.44.1:7070", "127.0.44.1:7070", "127.0.44.2:7070"}, Token: "t", InsecureToken: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.Endpoints(); len(got) != 2 {
		t.Fatalf("endpoints not deduplicated: %v", got)
	}
}
