package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/client"
)

// The commands that write: submit (a request), report (a fact), deliver
// (a receipt), all through sendEntry.

// sendEntry reads an entry command's payload argument and sends it with
// send under the deadline ctx gives; a refusal is printed with its outcome
// and becomes the command's exit error.
func sendEntry[R any](a *app, payloadArg string, ctx func() (context.Context, context.CancelFunc), send func(context.Context, *client.Client, []byte) (R, error)) (R, error) {
	var zero R
	p, err := a.readPayload(payloadArg)
	if err != nil {
		return zero, err
	}
	c, err := a.cli()
	if err != nil {
		return zero, err
	}
	cctx, cancel := ctx()
	defer cancel()
	r, err := send(cctx, c, p)
	if err != nil {
		a.printOutcome(err)
		return zero, a.writeErr(err)
	}
	return r, nil
}

func (a *app) submitCmd() *cobra.Command {
	var id string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "submit <type> <json|@file|->",
		Short: "Submit a request and wait for its outcome (exit 0 only when COMMITTED)",
		Args:  cobra.ExactArgs(2),
		RunE: func(_ *cobra.Command, args []string) error {
			opts := []client.Option{client.WithCommitTimeout(timeout)}
			if id != "" {
				opts = append(opts, client.WithID(id))
			}
			r, err := sendEntry(a, args[1], func() (context.Context, context.CancelFunc) { return a.commitBudget(timeout) },
				func(ctx context.Context, c *client.Client, p []byte) (client.Outcome, error) {
					return c.Submit(ctx, args[0], p, opts...)
				})
			if err != nil {
				return err
			}
			if a.structured() {
				return a.printJSON(&writv1.SubmitResponse{Outcome: r.Wire, RequestId: r.RequestID, Index: r.Index, Result: r.Result, Reason: r.Reason, ServedBy: r.ServedBy})
			}
			fmt.Fprintf(a.out, "COMMITTED %s at index %d (served by %s)\n", r.RequestID, r.Index, r.ServedBy)
			if len(r.Result) > 0 {
				fmt.Fprintf(a.out, "result: %s\n", r.Result)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "request ID (retrying with the same ID is safe); empty: a fresh one, printed with every outcome")
	cmd.Flags().DurationVar(&timeout, "commit-timeout", 0, "commit timeout (0: the node's default)")
	return cmd
}

func (a *app) reportCmd() *cobra.Command {
	var id string
	cmd := &cobra.Command{
		Use:   "report <type> <json|@file|->",
		Short: "Report a fact; acknowledged once it is durable in the node's outbox",
		Args:  cobra.ExactArgs(2),
		RunE: func(_ *cobra.Command, args []string) error {
			a.factType = args[0]
			r, err := sendEntry(a, args[1], a.ctx,
				func(ctx context.Context, c *client.Client, p []byte) (client.Received, error) {
					return c.Report(ctx, args[0], p, client.WithID(id))
				})
			if err != nil {
				return err
			}
			if a.structured() {
				return a.printJSON(&writv1.ReportResponse{Received: true, FactId: r.ID, NodeId: r.NodeID, OutboxDepth: r.OutboxDepth})
			}
			fmt.Fprintf(a.out, "RECEIVED fact %s by %s (durable in its outbox); it will be committed without resending\n", r.ID, r.NodeID)
			return nil
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "fact ID (default: the payload's id field, else generated)")
	return cmd
}

func (a *app) deliverCmd() *cobra.Command {
	var id string
	cmd := &cobra.Command{
		Use:   "deliver <type> <json|@file|->",
		Short: "Deliver a receipt (e.g. a job.dispatch batch); item outcomes arrive on watch",
		Args:  cobra.ExactArgs(2),
		RunE: func(_ *cobra.Command, args []string) error {
			r, err := sendEntry(a, args[1], a.ctx,
				func(ctx context.Context, c *client.Client, p []byte) (client.Received, error) {
					return c.Deliver(ctx, args[0], p, client.WithID(id))
				})
			if err != nil {
				return err
			}
			if a.structured() {
				return a.printJSON(&writv1.DeliverResponse{Received: true, RequestId: r.ID, Items: uint32(len(r.ItemIDs)), ItemIds: r.ItemIDs})
			}
			fmt.Fprintf(a.out, "RECEIVED %s with %d items %s; per-item outcomes: writctl watch\n", r.ID, len(r.ItemIDs), strings.Join(r.ItemIDs, " "))
			return nil
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "receipt ID (empty: generated)")
	return cmd
}
