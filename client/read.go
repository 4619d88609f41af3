package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/writ-dev/writ/api/writv1"
)

// Record is one key of the replicated state.
type Record struct {
	Key   string
	Value []byte
	Rev   uint64
}

// ErrNotFound is Get's error for a key that does not exist.
var ErrNotFound = errors.New("client: key not found")

// Get reads one key, linearizable unless Serializable is given. A missing
// key is ErrNotFound.
func (c *Client) Get(ctx context.Context, key string, opts ...Option) (Record, error) {
	o := options(opts)
	var resp *writv1.GetResponse
	t := c.retry(ctx, false, c.cfg.RequestTimeout, func(ctx context.Context, w writv1.WritClient) error {
		r, err := w.Get(ctx, &writv1.GetRequest{Key: key, Serializable: o.serializable})
		resp = r
		return err
	})
	if t.err != nil {
		return Record{}, readErr(t)
	}
	if !resp.Found || resp.Record == nil {
		return Record{}, ErrNotFound
	}
	return Record{Key: resp.Record.Key, Value: resp.Record.Value, Rev: resp.Record.Rev}, nil
}

// List reads every key under prefix, linearizable unless Serializable is
// given.
func (c *Client) List(ctx context.Context, prefix string, opts ...Option) ([]Record, error) {
	o := options(opts)
	var resp *writv1.ListResponse
	t := c.retry(ctx, false, c.cfg.RequestTimeout, func(ctx context.Context, w writv1.WritClient) error {
		r, err := w.List(ctx, &writv1.ListRequest{Prefix: prefix, Serializable: o.serializable})
		resp = r
		return err
	})
	if t.err != nil {
		return nil, readErr(t)
	}
	out := make([]Record, 0, len(resp.Records))
	for _, r := range resp.Records {
		out = append(out, Record{Key: r.Key, Value: r.Value, Rev: r.Rev})
	}
	return out, nil
}

// Outcome looks up the recorded outcome of a request or fact ID. Known is
// false when no node records one (never appended, or no longer retained);
// the error is only for a lookup that got no answer.
func (c *Client) Outcome(ctx context.Context, id string) (Outcome, error) {
	var resp *writv1.OutcomeResponse
	t := c.retry(ctx, false, c.cfg.RequestTimeout, func(ctx context.Context, w writv1.WritClient) error {
		r, err := w.Outcome(ctx, &writv1.OutcomeRequest{RequestId: id})
		resp = r
		return err
	})
	if t.err != nil {
		return Outcome{RequestID: id}, readErr(t)
	}
	out := Outcome{RequestID: id, Known: resp.Known, Endpoint: t.addr, Attempts: t.attempts}
	if !resp.Known {
		out.Reason = "no recorded outcome"
		return out, nil
	}
	out.Status, out.Wire, out.Index, out.ApplyStatus, out.Reason = statusOf(resp.Outcome), resp.Outcome, resp.Index, resp.Status, resp.Reason
	return out, nil
}

// Status reports the state of the endpoint the client uses (or of the
// first that answers).
func (c *Client) Status(ctx context.Context) (*writv1.StatusResponse, error) {
	var resp *writv1.StatusResponse
	t := c.retry(ctx, false, c.cfg.RequestTimeout, func(ctx context.Context, w writv1.WritClient) error {
		r, err := w.Status(ctx, &writv1.StatusRequest{})
		resp = r
		return err
	})
	if t.err != nil {
		return nil, readErr(t)
	}
	if resp.IsLeader {
		c.setLeader(t.addr)
	} else {
		c.setLeader(resp.LeaderApi)
	}
	return resp, nil
}

// Members lists the cluster's members as the answering endpoint sees them.
func (c *Client) Members(ctx context.Context) (*writv1.MembersResponse, error) {
	var resp *writv1.MembersResponse
	t := c.retry(ctx, false, c.cfg.RequestTimeout, func(ctx context.Context, w writv1.WritClient) error {
		r, err := w.Members(ctx, &writv1.MembersRequest{})
		resp = r
		return err
	})
	if t.err != nil {
		return nil, readErr(t)
	}
	return resp, nil
}

// readErr is the error of a read none of whose attempts succeeded: the
// last attempt's error, wrapping its gRPC status (or ErrClosed).
func readErr(t tries) error {
	if t.err == nil {
		return fmt.Errorf("client: no endpoint answered: %w", context.DeadlineExceeded)
	}
	if t.err == ErrClosed {
		return t.err
	}
	return fmt.Errorf("client: %s: %w", t.addr, t.err)
}
