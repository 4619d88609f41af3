package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/client"
)

// The commands that read: watch, get, list, outcome and facts.

func (a *app) watchCmd() *cobra.Command {
	var from uint64
	var types []string
	var key string
	var count int
	var dur time.Duration
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Stream committed outcomes (resumable with --from)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			c, err := a.cli()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithCancel(context.Background())
			if dur > 0 {
				ctx, cancel = context.WithTimeout(context.Background(), dur)
			}
			defer cancel()
			s, err := c.Watch(ctx, client.WatchOptions{FromIndex: from, Types: types, Key: key})
			if err != nil {
				if dur > 0 && ctx.Err() != nil {
					return nil
				}
				return a.rpcErr(err)
			}
			defer s.Close()
			n := 0
			for count == 0 || n < count {
				ev, err := s.Recv()
				if err != nil {
					if errors.Is(err, io.EOF) || (dur > 0 && ctx.Err() != nil) {
						return nil
					}
					return a.rpcErr(err)
				}
				n++
				if a.structured() {
					if err := a.printJSON(&writv1.WatchEvent{Index: ev.Index, Type: ev.Type, Key: ev.Key, Id: ev.ID, Status: ev.Status, Reason: ev.Reason, Class: ev.Class}); err != nil {
						return err
					}
					continue
				}
				line := fmt.Sprintf("%d\t%s\t%s\t%s\t%s", ev.Index, ev.Type, ev.Key, ev.Status, ev.ID)
				if ev.Reason != "" {
					line += "\t" + ev.Reason
				}
				fmt.Fprintln(a.out, line)
			}
			return nil
		},
	}
	cmd.Flags().Uint64Var(&from, "from", 0, "first log index to stream")
	cmd.Flags().StringSliceVar(&types, "type", nil, "only these entry types")
	cmd.Flags().StringVar(&key, "key", "", "only this instance key")
	cmd.Flags().IntVar(&count, "count", 0, "stop after this many events (0: never)")
	cmd.Flags().DurationVar(&dur, "for", 0, "stop after this long (0: never)")
	return cmd
}

func rawOrString(b []byte) any {
	if json.Valid(b) {
		return json.RawMessage(b)
	}
	return string(b)
}

func (a *app) getCmd() *cobra.Command {
	var serial bool
	cmd := &cobra.Command{
		Use:   "get <key>",
		Short: "Read one key (linearizable unless --serializable)",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			r, err := call(a, writv1.WritClient.Get, &writv1.GetRequest{Key: args[0], Serializable: serial})
			if err != nil {
				return err
			}
			if !r.Found {
				if a.structured() {
					_ = a.printAny(map[string]any{"key": args[0], "found": false})
				}
				return fail(exitError, "%s: not found", args[0])
			}
			if a.structured() {
				return a.printAny(map[string]any{"key": r.Record.Key, "found": true, "rev": r.Record.Rev, "value": rawOrString(r.Record.Value)})
			}
			fmt.Fprintf(a.out, "%s (rev %d)\n%s\n", r.Record.Key, r.Record.Rev, r.Record.Value)
			return nil
		},
	}
	cmd.Flags().BoolVar(&serial, "serializable", false, "read this node's applied state without a quorum round")
	return cmd
}

func (a *app) listCmd() *cobra.Command {
	var serial bool
	cmd := &cobra.Command{
		Use:   "list [prefix]",
		Short: "List keys under a prefix (e.g. job/, queue/, _m/job/)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			prefix := ""
			if len(args) == 1 {
				prefix = args[0]
			}
			r, err := call(a, writv1.WritClient.List, &writv1.ListRequest{Prefix: prefix, Serializable: serial})
			if err != nil {
				return err
			}
			if a.structured() {
				out := []any{}
				for _, rec := range r.Records {
					out = append(out, map[string]any{"key": rec.Key, "rev": rec.Rev, "value": rawOrString(rec.Value)})
				}
				return a.printAny(out)
			}
			w := a.table()
			for _, rec := range r.Records {
				fmt.Fprintf(w, "%s\t%d\t%s\n", rec.Key, rec.Rev, rec.Value)
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&serial, "serializable", false, "read this node's applied state without a quorum round")
	return cmd
}

func (a *app) outcomeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "outcome <request-id>",
		Short: "Show the recorded outcome of a request or fact ID",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			r, err := call(a, writv1.WritClient.Outcome, &writv1.OutcomeRequest{RequestId: args[0]})
			if err != nil {
				return err
			}
			if a.structured() {
				if err := a.printJSON(r); err != nil {
					return err
				}
			} else if r.Known {
				line := fmt.Sprintf("%s %s at index %d (%s)", args[0], r.Outcome, r.Index, r.Status)
				if r.Reason != "" {
					line += ": " + r.Reason
				}
				fmt.Fprintln(a.out, line)
			}
			if !r.Known {
				return fail(exitError, "%s: no recorded outcome on this node (not committed, or no longer retained)", args[0])
			}
			return nil
		},
	}
}

func (a *app) factsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "facts",
		Short: "Show this node's fact outbox (received, not yet known committed)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			r, err := call(a, writv1.WritClient.Outbox, &writv1.OutboxRequest{})
			if err != nil {
				return err
			}
			if a.structured() {
				return a.printJSON(r)
			}
			fmt.Fprintf(a.out, "outbox of %s: %d facts, oldest %s\n", r.NodeId, r.Depth, time.Duration(r.OldestAgeMs)*time.Millisecond)
			w := a.table()
			for _, f := range r.Facts {
				fmt.Fprintf(w, "%s\t%s\tage %s\tattempts %d\n", f.Id, f.Type, time.Duration(f.AgeMs)*time.Millisecond, f.Attempts)
			}
			return w.Flush()
		},
	}
}
