package client

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/writ-dev/writ/api/writv1"
)

// Option adjusts one call.
type Option func(*callOpts)

type callOpts struct {
	id            string
	commitTimeout time.Duration
	serializable  bool
}

// WithID sends the request with this ID instead of a fresh one: use it to
// retry a request whose outcome was Uncertain (the cluster answers a retry
// with the original outcome), or to pick your own idempotency key. For
// facts and receipts it overrides the ID the payload's id field gives.
func WithID(id string) Option { return func(o *callOpts) { o.id = id } }

// WithCommitTimeout sets the request's commit timeout (default: the node's).
func WithCommitTimeout(d time.Duration) Option { return func(o *callOpts) { o.commitTimeout = d } }

// Serializable makes a read (Get, List) answer from the endpoint's applied
// state without a quorum round: faster, possibly stale.
func Serializable() Option { return func(o *callOpts) { o.serializable = true } }

func options(opts []Option) callOpts {
	var o callOpts
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Submit sends a request-class entry of type typ with a JSON payload and
// waits for its outcome. The error is nil exactly when the outcome is
// Committed; otherwise it is an *OutcomeError holding the same Outcome.
//
// The request ID is generated before the first attempt (or given by
// WithID). An attempt that gets no answer is retried on the next endpoint
// with the same ID, so the request is applied at most once; when no
// endpoint settles it, the Outcome is Uncertain and carries the ID for
// Client.Outcome.
func (c *Client) Submit(ctx context.Context, typ string, payload []byte, opts ...Option) (Outcome, error) {
	o := options(opts)
	id := o.id
	if id == "" {
		id = NewRequestID()
	}
	req := &writv1.SubmitRequest{Entry: &writv1.Entry{Type: typ, Id: id, Payload: payload}, TimeoutMs: uint32(o.commitTimeout.Milliseconds())}
	var resp *writv1.SubmitResponse
	t := c.retry(ctx, true, c.cfg.RequestTimeout+o.commitTimeout, func(ctx context.Context, w writv1.WritClient) error {
		r, err := w.Submit(ctx, req)
		resp = r
		return err
	})
	if t.err == nil {
		out := Outcome{Status: Committed, Wire: resp.Outcome, RequestID: resp.RequestId, Index: resp.Index, Result: resp.Result,
			Reason: resp.Reason, ServedBy: resp.ServedBy, Endpoint: t.addr, Attempts: t.attempts, Known: true}
		if out.RequestID == "" {
			out.RequestID = id
		}
		return out, nil
	}
	return c.settle(t, id)
}

// settle turns the attempts of a call that did not succeed into its Outcome
// and *OutcomeError.
func (c *Client) settle(t tries, id string) (Outcome, error) {
	var out Outcome
	d, ok := detail(t.err)
	switch {
	case ok:
		out = fromDetail(d, id)
		if t.maybe && out.Status == Unavailable {
			// this answer is about the last attempt only: an earlier one
			// may have been appended
			out.Status, out.Wire = Uncertain, writv1.Outcome_UNCERTAIN
			out.Reason = "an earlier attempt got no answer and may still commit; the last one: " + out.Reason
		}
	case t.err == ErrClosed:
		out = Outcome{Status: Unavailable, RequestID: id, Reason: ErrClosed.Error()}
		if t.maybe {
			out.Status = Uncertain
		}
	case transportFailure(t.err) || t.err == nil:
		// t.err is nil only when no attempt ran (ctx already done)
		reason := "no endpoint answered"
		if t.err != nil {
			reason = fmt.Sprintf("no answer from %s: %s", t.addr, status.Convert(t.err).Message())
		}
		out = Outcome{Status: Unavailable, RequestID: id, Reason: reason + " (the request never left the client)"}
		if t.maybe {
			out = Outcome{Status: Uncertain, RequestID: id, Reason: reason + " after the request was sent"}
		}
	case status.Code(t.err) == codes.ResourceExhausted && !strings.Contains(status.Convert(t.err).Message(), "larger than max"):
		// overloaded: refused before anything was accepted
		out = Outcome{Status: Unavailable, RequestID: id, Reason: status.Convert(t.err).Message()}
		if t.maybe {
			out.Status = Uncertain
		}
	default:
		// the server refused the call itself (authentication, message
		// size, an unknown method): nothing was appended
		out = Outcome{Status: Rejected, RequestID: id, Reason: status.Convert(t.err).Message()}
		if t.maybe {
			out.Status = Uncertain
		}
	}
	out.Endpoint, out.Attempts = t.addr, t.attempts
	return out, &OutcomeError{Outcome: out, Err: t.err}
}

// Received is a node's acknowledgement of a fact or a receipt.
type Received struct {
	// ID is the fact or receipt ID.
	ID string
	// NodeID is the node whose outbox holds the fact (Report).
	NodeID string
	// OutboxDepth is that outbox's depth after the fact (Report).
	OutboxDepth uint64
	// OutcomeID is what Client.Outcome looks the fact up by
	// ("fact:<type>:<id>", Report).
	OutcomeID string
	// ItemIDs are the receipt's item request IDs (Deliver).
	ItemIDs []string
	// Endpoint is the endpoint that acknowledged.
	Endpoint string
}

// Report sends a fact. It returns once a node has it durable in its outbox;
// the node commits it without the reporter resending. The fact ID is the
// payload's declared id field unless WithID gives one, so a retry (on any
// node) is deduplicated. A failure is an *OutcomeError.
func (c *Client) Report(ctx context.Context, typ string, payload []byte, opts ...Option) (Received, error) {
	o := options(opts)
	req := &writv1.ReportRequest{Entry: &writv1.Entry{Type: typ, Id: o.id, Payload: payload}}
	var resp *writv1.ReportResponse
	t := c.retry(ctx, false, c.cfg.RequestTimeout, func(ctx context.Context, w writv1.WritClient) error {
		r, err := w.Report(ctx, req)
		resp = r
		return err
	})
	if t.err != nil {
		_, err := c.settle(t, o.id)
		return Received{}, err
	}
	return Received{ID: resp.FactId, OutcomeID: "fact:" + typ + ":" + resp.FactId, NodeID: resp.NodeId, OutboxDepth: resp.OutboxDepth, Endpoint: t.addr}, nil
}

// Deliver sends a receipt (a batch of items); the items' outcomes arrive on
// Watch. The receipt ID is the payload's declared id field unless WithID
// gives one. A failure is an *OutcomeError.
func (c *Client) Deliver(ctx context.Context, typ string, payload []byte, opts ...Option) (Received, error) {
	o := options(opts)
	req := &writv1.DeliverRequest{Entry: &writv1.Entry{Type: typ, Id: o.id, Payload: payload}}
	var resp *writv1.DeliverResponse
	t := c.retry(ctx, true, c.cfg.RequestTimeout, func(ctx context.Context, w writv1.WritClient) error {
		r, err := w.Deliver(ctx, req)
		resp = r
		return err
	})
	if t.err != nil {
		_, err := c.settle(t, o.id)
		return Received{}, err
	}
	return Received{ID: resp.RequestId, ItemIDs: resp.ItemIds, Endpoint: t.addr}, nil
}

// Typed is a payload struct generated from the schema: it names its entry
// type and encodes as JSON through its field tags.
type Typed interface {
	EntryType() string
}

// SubmitTyped is Submit for a generated payload struct, passed by value
// (the generated methods have pointer receivers):
//
//	client.SubmitTyped(ctx, c, jobsgen.JobSubmit{JobID: "j1", ...})
func SubmitTyped[T any, P interface {
	*T
	Typed
}](ctx context.Context, c *Client, v T, opts ...Option) (Outcome, error) {
	typ, b, err := encode(P(&v))
	if err != nil {
		o := Outcome{Status: Rejected, RequestID: options(opts).id, Reason: err.Error()}
		return o, &OutcomeError{Outcome: o, Err: err}
	}
	return c.Submit(ctx, typ, b, opts...)
}

// ReportTyped is Report for a generated payload struct.
func ReportTyped[T any, P interface {
	*T
	Typed
}](ctx context.Context, c *Client, v T, opts ...Option) (Received, error) {
	typ, b, err := encode(P(&v))
	if err != nil {
		return Received{}, err
	}
	return c.Report(ctx, typ, b, opts...)
}

// DeliverTyped is Deliver for a generated payload struct.
func DeliverTyped[T any, P interface {
	*T
	Typed
}](ctx context.Context, c *Client, v T, opts ...Option) (Received, error) {
	typ, b, err := encode(P(&v))
	if err != nil {
		return Received{}, err
	}
	return c.Deliver(ctx, typ, b, opts...)
}

func encode(p Typed) (string, []byte, error) {
	typ := p.EntryType()
	if typ == "" {
		return "", nil, fmt.Errorf("client: %T names no entry type: pass a payload struct generated from the schema", p)
	}
	b, err := json.Marshal(p)
	if err != nil {
		return "", nil, fmt.Errorf("client: encoding %s payload: %w", typ, err)
	}
	return typ, b, nil
}
