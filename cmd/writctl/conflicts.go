package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/kv"
)

func conflictKey(k string) string {
	if strings.HasPrefix(k, "_conflict/") {
		return k
	}
	return "_conflict/" + k
}

func (a *app) conflictsCmd() *cobra.Command {
	var all bool
	list := func(*cobra.Command, []string) error {
		r, err := call(a, writv1.WritClient.Conflicts, &writv1.ConflictsRequest{})
		if err != nil {
			return err
		}
		var shown []*writv1.Conflict
		for _, x := range r.Conflicts {
			var c kv.ConflictCase
			if json.Unmarshal(x.Case, &c) == nil && (c.Open || all) {
				shown = append(shown, x)
			}
		}
		if a.structured() {
			out := []any{}
			for _, x := range shown {
				out = append(out, map[string]any{"key": x.Key, "rev": x.Rev, "case": rawOrString(x.Case)})
			}
			return a.printAny(out)
		}
		if all {
			fmt.Fprintf(a.out, "%d conflict cases\n", len(shown))
		} else {
			fmt.Fprintf(a.out, "%d open conflict cases\n", len(shown))
		}
		w := a.table()
		if len(shown) > 0 {
			fmt.Fprintln(w, "KEY\tSTATE\tCURRENT\tINCOMING\tENTRY\tOBSERVED\tREASON")
		}
		for _, x := range shown {
			var c kv.ConflictCase
			_ = json.Unmarshal(x.Case, &c)
			st := "open"
			if !c.Open {
				st = "resolved"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", x.Key, st, c.Current, c.Incoming, c.EntryID, len(c.Observations), c.Reason)
		}
		return w.Flush()
	}
	cmd := &cobra.Command{
		Use:   "conflicts [list|show KEY|resolve KEY --reason TEXT]",
		Short: "List, show and resolve conflict cases (facts that contradicted state)",
		Args:  cobra.NoArgs,
		RunE:  list,
	}
	cmd.PersistentFlags().BoolVar(&all, "all", false, "also list resolved cases")
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the open conflict cases (--all: resolved ones too)",
		Args:  cobra.NoArgs,
		RunE:  list,
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "show KEY",
		Short: "Show one case in full: incoming payload, observations, resolution (KEY: _conflict/<machine>/<instance> or <machine>/<instance>)",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			key := conflictKey(args[0])
			r, err := call(a, writv1.WritClient.Conflicts, &writv1.ConflictsRequest{})
			if err != nil {
				return err
			}
			for _, x := range r.Conflicts {
				if x.Key == key {
					return a.printAny(map[string]any{"key": x.Key, "rev": x.Rev, "case": rawOrString(x.Case)})
				}
			}
			return fail(exitError, "no conflict case %s: list the cases with writctl conflicts list --all", key)
		},
	})
	var reason, by string
	var applyIncoming bool
	resolve := &cobra.Command{
		Use:   "resolve KEY --reason TEXT [--apply-incoming]",
		Short: "Close a conflict case through the log (audited: who, when, why); the state stays as it is unless --apply-incoming",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if strings.TrimSpace(reason) == "" {
				return fail(exitUsage, "conflicts resolve: --reason is required: say why the case is closed, e.g. --reason \"job re-run by hand\"")
			}
			r, err := call(a, writv1.WritClient.ResolveConflict, &writv1.ResolveConflictRequest{Key: conflictKey(args[0]), Reason: reason, By: by,
				ApplyIncoming: applyIncoming})
			if err != nil {
				return err
			}
			if a.structured() {
				return a.printAny(map[string]any{"outcome": r.Outcome.String(), "index": r.Index, "reason": r.Reason, "case": rawOrString(r.Case)})
			}
			line := fmt.Sprintf("%s %s resolved at index %d", r.Outcome, conflictKey(args[0]), r.Index)
			var rc kv.ConflictCase
			if json.Unmarshal(r.Case, &rc) == nil && rc.Resolution != nil && rc.Resolution.Applied != nil {
				ap := rc.Resolution.Applied
				line += fmt.Sprintf("; applied incoming %s %s: %s/%s %s -> %s (guard %s)", ap.Type, ap.EntryID, rc.Machine, rc.Instance, ap.From, ap.To, ap.Verdict)
			}
			if r.Reason != "" {
				line += " (" + r.Reason + ")"
			}
			fmt.Fprintln(a.out, line)
			return nil
		},
	}
	resolve.Flags().StringVar(&reason, "reason", "", "why the case is closed (required; recorded in the case)")
	resolve.Flags().StringVar(&by, "by", os.Getenv("USER"), "who resolves it (recorded with the caller's address)")
	resolve.Flags().BoolVar(&applyIncoming, "apply-incoming", false, "also apply the retained incoming fact: move the instance to its state, overriding the guard (recorded in the case and on watch)")
	cmd.AddCommand(resolve)
	return cmd
}
