package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/node/config"
)

func (a *app) configCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Show or upgrade the cluster configuration"}
	cmd.AddCommand(a.configShowCmd(), a.configUpgradeCmd())
	return cmd
}

func (a *app) configShowCmd() *cobra.Command {
	var typ string
	cmd := &cobra.Command{
		Use:   "show [--type T]",
		Short: "Show the committed (activated) configuration of a config type and its tag",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			r, err := call(a, writv1.WritClient.ConfigShow, &writv1.ConfigShowRequest{Type: typ})
			if err != nil {
				return err
			}
			if a.structured() {
				return a.printAny(map[string]any{"type": r.Type, "tag": r.Tag, "index": r.Index, "activated": r.Activated, "document": rawOrString(r.Document)})
			}
			switch {
			case !r.Activated && r.Type != config.ClusterType && r.Type != "":
				fmt.Fprintf(a.out, "%s: no configuration of this type has activated\n", r.Type)
			case !r.Activated:
				fmt.Fprintf(a.out, "%s tag %q: no configuration upgrade has activated; this node runs with\n%s\n", r.Type, r.Tag, r.Document)
			default:
				fmt.Fprintf(a.out, "%s tag %q (activated at index %d)\n%s\n", r.Type, r.Tag, r.Index, r.Document)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&typ, "type", "", "config-class entry type (default: the schema's only config type; "+config.ClusterType+" for writ's own settings)")
	return cmd
}

func (a *app) configUpgradeCmd() *cobra.Command {
	var file, typ string
	var wait time.Duration
	var dry, force bool
	cmd := &cobra.Command{
		Use:   "upgrade [--type T] --file F",
		Short: "Validate, diff and submit a configuration change of any config type; exit 0 only when it activated on a majority",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if file == "" {
				return fail(exitUsage, "config upgrade needs --file F (a YAML, TOML or JSON document with version and settings)")
			}
			doc, err := os.ReadFile(file)
			if err != nil {
				return fail(exitUsage, "cannot read --file %s: %v", file, err)
			}
			format := ""
			switch {
			case hasExt(file, ".toml"):
				format = "toml"
			case hasExt(file, ".json"):
				format = "json"
			case hasExt(file, ".yaml", ".yml"):
				format = "yaml"
			}
			c, err := a.dial()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), min(a.timeout, 5*time.Second))
			cur, err := c.ConfigShow(ctx, &writv1.ConfigShowRequest{Type: typ})
			cancel()
			if err != nil {
				// The upgrade itself decides; without the committed
				// configuration there is just no diff to show. Only an
				// unreachable node or an unknown type stops here.
				d, ok := api.OutcomeFromError(err)
				if ok && d.Outcome == writv1.Outcome_REJECTED {
					return fail(exitUsage, "--type %s: %s", typ, d.Reason)
				}
				if !ok && status.Code(err) != codes.DeadlineExceeded {
					// no node to name the default type: a document that is
					// not even valid as writ's own settings is reported as
					// such first
					if typ == "" || typ == config.ClusterType {
						if _, perr := config.ParseCluster(doc, format); perr != nil {
							return fail(exitUsage, "%s: %v", file, perr)
						}
					}
					return a.rpcErr(err)
				}
				a.say("cannot read the committed configuration (%v); diff against an empty configuration", oneLineErr(err))
				cur = &writv1.ConfigShowResponse{Tag: "?", Type: typ}
			}
			resolved := cur.Type
			if resolved == "" {
				resolved = typ
			}
			var payload []byte
			var next string
			var changes []config.Change
			if resolved == config.ClusterType || resolved == "" {
				// writ's own settings: the table writd validates its own
				// configuration with
				want, err := config.ParseCluster(doc, format)
				if err != nil {
					return fail(exitUsage, "%s: %v", file, err)
				}
				have := &config.Cluster{Version: cur.Tag, Settings: map[string]string{}}
				if len(cur.Document) > 0 {
					if h, err := config.ParseCluster(cur.Document, ""); err == nil {
						have = h
					}
				}
				payload, next, changes = want.Payload(), want.Version, config.Diff(have, want)
			} else {
				// a config type of the schema: the node validates it
				// against the schema
				if payload, err = config.DocumentJSON(doc, format); err != nil {
					return fail(exitUsage, "%s: %v", file, err)
				}
				next = versionField(payload)
				changes = docDiff(cur.Document, payload)
			}
			if cur.Activated && !force {
				if cmp, ok := config.CompareVersions(next, cur.Tag); ok && cmp < 0 {
					return fail(exitRejected, "%s: version %q is lower than the active %q of %s: use a higher version, or pass --force to roll back on purpose", file, next, cur.Tag, resolved)
				}
			}
			a.say("%s: committed tag %q → proposed %q", resolved, cur.Tag, next)
			for _, ch := range changes {
				kind := "live reload"
				if !ch.Reload {
					kind = "restart required"
				}
				a.say("  %-28s %q → %q (%s)", ch.Key, ch.Old, ch.New, kind)
			}
			if len(changes) == 0 {
				a.say("nothing to change: %q is already the committed configuration", next)
				return nil
			}
			if dry {
				return nil
			}
			sctx, scancel := context.WithTimeout(context.Background(), wait)
			defer scancel()
			stream, err := c.ConfigUpgrade(sctx, &writv1.ConfigUpgradeRequest{Document: payload, Format: "json", Type: resolved, Force: force})
			if err != nil {
				return a.rpcErr(err)
			}
			var prog *upgradeProgress
			if !a.structured() {
				prog = newUpgradeProgress(a.out, upgradeTTY(a.out))
				defer prog.close()
			}
			show := func(p *writv1.ConfigProgress) {
				if prog == nil {
					a.emit(p)
					return
				}
				prog.phase(p)
			}
			var last *writv1.ConfigProgress
			for {
				p, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					if d, ok := api.OutcomeFromError(err); ok {
						show(&writv1.ConfigProgress{Phase: writv1.ConfigProgress_FAILED, Message: d.Reason, Outcome: d.Outcome})
						prog.close()
						if d.Outcome == writv1.Outcome_REJECTED {
							return fail(exitRejected, "configuration %q was refused and did NOT activate: %s", next, d.Reason)
						}
						if d.Outcome == writv1.Outcome_UNCERTAIN {
							return fail(exitUncertain, "configuration %q did NOT activate (%s); the node keeps proposing its abort, and only the requesting node ever proposes an activation, so it will not activate later; the committed tag is unchanged", next, d.Reason)
						}
						return fail(exitUncertain, "configuration %q did NOT activate and will not activate later: %s", next, d.Reason)
					}
					prog.close()
					return fail(exitUncertain, "lost the upgrade stream before a definite answer (%v): check `writctl config show` on a majority", err)
				}
				last = p
				show(p)
			}
			prog.close()
			if last == nil {
				return fail(exitUncertain, "the node closed the upgrade stream without an answer: check `writctl config show`")
			}
			switch last.Phase {
			case writv1.ConfigProgress_ACTIVATED, writv1.ConfigProgress_RELOADED:
				if last.Outcome != writv1.Outcome_COMMITTED && last.Outcome != writv1.Outcome_OUTCOME_UNSPECIFIED {
					return fail(exitUncertain, "activation reported outcome %s", last.Outcome)
				}
				return nil
			case writv1.ConfigProgress_FAILED:
				return fail(exitUncertain, "configuration %q did NOT activate and will not activate later: %s", next, last.Message)
			}
			return fail(exitUncertain, "upgrade stream ended in phase %s without activation: check `writctl config show`", last.Phase)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the new configuration document")
	cmd.Flags().DurationVar(&wait, "wait", 2*time.Minute, "how long to wait for the node's definite answer (the node aborts a change that does not activate within its pipeline.config_timeout)")
	cmd.Flags().BoolVar(&dry, "dry-run", false, "validate and show the diff only")
	cmd.Flags().StringVar(&typ, "type", "", "config-class entry type of the document (default: the schema's only config type; "+config.ClusterType+" for writ's own settings)")
	cmd.Flags().BoolVar(&force, "force", false, "accept a version lower than the active one (a deliberate rollback)")
	return cmd
}

func hasExt(f string, exts ...string) bool {
	for _, e := range exts {
		if len(f) > len(e) && f[len(f)-len(e):] == e {
			return true
		}
	}
	return false
}

func (a *app) say(format string, args ...any) {
	if a.structured() {
		return
	}
	fmt.Fprintf(a.out, format+"\n", args...)
}

// emit prints one progress message as a structured record.
func (a *app) emit(p *writv1.ConfigProgress) { _ = a.printJSON(p) }

func oneLineErr(err error) string {
	if d, ok := api.OutcomeFromError(err); ok {
		return d.Outcome.String() + ": " + d.Reason
	}
	return err.Error()
}
