package main

import (
	"context"
	"errors"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/client"
)

// endpoints splits --addr: one writd API address, or several separated by
// commas (the client fails over between them and prefers the leader).
func (a *app) endpoints() []string {
	var out []string
	for _, e := range strings.Split(a.addr, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// clientConfig is how writctl reaches the cluster.
func (a *app) clientConfig() (client.Config, error) {
	tc, err := a.creds.tlsConfig()
	if err != nil {
		return client.Config{}, err
	}
	return client.Config{
		Endpoints:      a.endpoints(),
		DialTimeout:    min(a.timeout, client.DefaultDialTimeout),
		RequestTimeout: a.timeout,
		TLS:            tc,
		Token:          a.creds.token,
		Stream:         a.stream,
	}, nil
}

// cli returns the command's client, made on first use.
func (a *app) cli() (*client.Client, error) {
	if a.cl != nil {
		return a.cl, nil
	}
	cfg, err := a.clientConfig()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg)
	if err != nil {
		return nil, fail(exitUsage, "--addr %q: %v: pass host:port of a writd API (several: comma-separated)", a.addr, err)
	}
	a.cl = c
	return c, nil
}

// writeErr turns the failure of a request-shaped call made through the
// client (submit, report, deliver) into one line and an exit code. Exit 4
// only when a server said UNAVAILABLE or the request never left writctl;
// any failure after it may have reached a node is UNCERTAIN (exit 5), with
// the ID to look up.
func (a *app) writeErr(err error) error {
	o, ok := client.OutcomeOf(err)
	if !ok {
		return a.rpcErr(err)
	}
	var oe *client.OutcomeError
	_ = errors.As(err, &oe)
	switch {
	case o.Wire != writv1.Outcome_OUTCOME_UNSPECIFIED:
		// a server's answer (or, for a retried request, the client's
		// summary of what its attempts leave open)
		return a.outcomeErr(outcomeDetail(o))
	case o.Status == client.Uncertain:
		return a.outcomeErr(outcomeDetail(o))
	case o.Status == client.Unavailable && oe != nil && oe.Err != nil && status.Code(oe.Err) == codes.ResourceExhausted:
		// overloaded: refused before anything was accepted
		return a.outcomeErr(outcomeDetail(o))
	case o.Status == client.Unavailable:
		why := o.Reason
		if oe != nil && oe.Err != nil {
			why = status.Convert(oe.Err).Message()
		}
		return fail(exitUnavailable, "cannot reach writd at %s (%s): the request never left writctl, nothing was appended: start writd there or pass --addr (env WRITCTL_ADDR)", a.addr, why)
	}
	if oe != nil && oe.Err != nil {
		return a.rpcErr(oe.Err)
	}
	return fail(exitError, "%s", o.Reason)
}

// outcomeDetail is the wire form of a client outcome (for -o json and the
// one-line message).
func outcomeDetail(o client.Outcome) *writv1.OutcomeDetail {
	w := o.Wire
	switch {
	case o.Status == client.Uncertain:
		w = writv1.Outcome_UNCERTAIN
	case w == writv1.Outcome_OUTCOME_UNSPECIFIED && o.Status == client.Unavailable:
		w = writv1.Outcome_UNAVAILABLE
	}
	return &writv1.OutcomeDetail{Outcome: w, RequestId: o.RequestID, Reason: o.Reason, Field: o.Field, Index: o.Index}
}

// commitBudget is the deadline of a submit: writctl's --timeout plus the
// request's commit timeout.
func (a *app) commitBudget(commit time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), a.timeout+commit)
}

// printOutcome prints a failed request's outcome with -o json|yaml.
func (a *app) printOutcome(err error) {
	if o, ok := client.OutcomeOf(err); ok && a.structured() {
		_ = a.printJSON(outcomeDetail(o))
	}
}

// outcomeErr is outcomeErr for this command: a fact answered UNCERTAIN
// (its outbox record may be on disk, or no answer came after it was sent)
// is looked up by its command ID and reported again with the same fact ID.
func (a *app) outcomeErr(d *writv1.OutcomeDetail) error {
	if a.factType == "" || d.Outcome != writv1.Outcome_UNCERTAIN || d.RequestId == "" {
		return outcomeErr(d)
	}
	msg := "UNCERTAIN fact " + d.RequestId
	if d.Reason != "" {
		msg += ": " + d.Reason
	}
	return fail(exitUncertain, "%s; it may still commit: look it up with `writctl outcome fact:%s:%s` or report it again with --id %s (the same fact ID is deduplicated)",
		msg, a.factType, d.RequestId, d.RequestId)
}
