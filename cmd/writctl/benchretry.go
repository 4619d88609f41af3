package main

import (
	"context"
	"errors"
	"time"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/client"
)

// retried is what benchRetry did beyond a single call.
type retried struct {
	// again: the operation needed more than one call (same ID: a retry is
	// deduplicated by the cluster).
	again bool
	// resent: its ID was made final as NOT_COMMITTED (a commit timeout
	// during a failover), so the same operation went again under a new ID.
	resent int
}

// benchRetry drives one operation to a definite answer through the client
// (failover between endpoints, the same request ID on every attempt) for up
// to budget: UNCERTAIN and UNAVAILABLE are retried with the same ID,
// NOT_COMMITTED under a new ID (the old one is spent and nothing of it
// applied), and COMMITTED, RECEIVED or REJECTED end it. per bounds each
// call. The answer is the outcome's name and its detail (nil on success).
func benchRetry(cl *client.Client, v benchVerb, e *writv1.Entry, budget, per time.Duration) (string, *writv1.OutcomeDetail, retried) {
	var r retried
	deadline := time.Now().Add(budget)
	id := e.Id
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), per)
		var err error
		switch v {
		case verbReport:
			_, err = cl.Report(ctx, e.Type, e.Payload, client.WithID(e.Id))
		case verbDeliver:
			_, err = cl.Deliver(ctx, e.Type, e.Payload, client.WithID(e.Id))
		default:
			_, err = cl.Submit(ctx, e.Type, e.Payload, client.WithID(id))
		}
		cancel()
		if err == nil {
			return v.ok(), nil, r
		}
		var oe *client.OutcomeError
		st := client.Uncertain
		if errors.As(err, &oe) {
			st = oe.Outcome.Status
		}
		d := &writv1.OutcomeDetail{Outcome: writv1.Outcome_UNCERTAIN, Reason: err.Error()}
		if oe != nil {
			d = &writv1.OutcomeDetail{Outcome: oe.Outcome.Wire, Reason: oe.Outcome.Reason, Field: oe.Outcome.Field}
			if d.Outcome == writv1.Outcome_OUTCOME_UNSPECIFIED {
				d.Outcome = writv1.Outcome(writv1.Outcome_value[st.String()])
			}
		}
		if st == client.Rejected || time.Now().Add(100*time.Millisecond).After(deadline) {
			return d.Outcome.String(), d, r
		}
		r.again = true
		if st == client.NotCommitted && v == verbSubmit {
			id = client.NewRequestID()
			r.resent++
		}
		time.Sleep(min(50*time.Millisecond<<min(attempt, 4), time.Second))
	}
}

// benchErr carries benchRetry's final detail through bench's error path.
type benchErr struct{ d *writv1.OutcomeDetail }

func (e *benchErr) Error() string { return e.d.Outcome.String() + ": " + e.d.Reason }
