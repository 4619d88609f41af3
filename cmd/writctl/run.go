package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/writ-dev/writ/api"
	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/client"
)

// Exit codes.
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2
	exitRejected    = 3
	exitUnavailable = 4
	exitUncertain   = 5
	// exitNotCommitted: the request ID was fenced; definitely not
	// committed, and the ID can never commit: submit again with a new ID.
	exitNotCommitted = 6
)

// DefaultAddr is the API address writctl talks to when neither --addr nor
// WRITCTL_ADDR is set (writd's default api.addr).
const DefaultAddr = "127.0.0.1:7070"

type exitErr struct {
	code int
	msg  string
}

func (e *exitErr) Error() string { return e.msg }

func fail(code int, format string, a ...any) error {
	return &exitErr{code: code, msg: fmt.Sprintf(format, a...)}
}

type app struct {
	addr    string
	creds   creds
	output  string
	timeout time.Duration
	// stream sends writes on a Write stream per endpoint (bench --stream).
	stream bool

	stdin     io.Reader
	out, errw io.Writer
	env       func(string) string

	cl   *client.Client
	code int
	// records counts structured records printed (stream separators).
	records int
	// factType is the type a report sends (its UNCERTAIN answer names
	// the fact's lookup).
	factType string
}

// Run executes writctl with args and returns the process exit code.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin, out: stdout, errw: stderr, env: os.Getenv}
	root := a.root()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if a.cl != nil {
		_ = a.cl.Close()
	}
	if err != nil {
		var ee *exitErr
		if errors.As(err, &ee) {
			if ee.msg != "" {
				fmt.Fprintln(stderr, "writctl: "+ee.msg)
			}
			return ee.code
		}
		fmt.Fprintf(stderr, "writctl: %v (see writctl --help)\n", err)
		return exitUsage
	}
	return a.code
}

func (a *app) root() *cobra.Command {
	root := &cobra.Command{
		Use:           "writctl",
		Short:         "Operate a writ cluster over its gRPC API",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(a.output); err != nil {
				return err
			}
			if !cmd.Flags().Changed("addr") {
				if env := a.env("WRITCTL_ADDR"); env != "" {
					a.addr = env
				}
			}
			a.creds.fromEnv(cmd, a.env)
			return nil
		},
	}
	pf := root.PersistentFlags()
	pf.StringVar(&a.addr, "addr", DefaultAddr, "writd API address host:port, or several comma-separated (leader preferred, failover) (env WRITCTL_ADDR)")
	pf.StringVarP(&a.output, "output", "o", "text", "output format: text, json, yaml or table")
	pf.DurationVar(&a.timeout, "timeout", 10*time.Second, "deadline for each call")
	a.creds.addFlags(pf)
	addVersion(root)
	root.AddCommand(a.statusCmd(), a.membersCmd(), a.submitCmd(), a.reportCmd(), a.deliverCmd(), a.watchCmd(),
		a.getCmd(), a.listCmd(), a.outcomeCmd(), a.factsCmd(), a.conflictsCmd(), a.pluginsCmd(), a.configCmd(), a.benchCmd(), a.keyringCmd())
	withUsageFix(root)
	return root
}

func (a *app) dial() (writv1.WritClient, error) {
	c, err := a.cli()
	if err != nil {
		return nil, err
	}
	return c.Raw(), nil
}

func (a *app) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), a.timeout)
}

// call runs one unary RPC through the client under the command's deadline;
// a failure comes back as rpcErr's one line and exit code.
func call[Req, Resp any](a *app, method func(writv1.WritClient, context.Context, Req, ...grpc.CallOption) (Resp, error), req Req) (Resp, error) {
	var zero Resp
	c, err := a.dial()
	if err != nil {
		return zero, err
	}
	ctx, cancel := a.ctx()
	defer cancel()
	r, err := method(c, ctx, req)
	if err != nil {
		return zero, a.rpcErr(err)
	}
	return r, nil
}

// rpcErr turns a call error into one clear line and an exit code.
func (a *app) rpcErr(err error) error {
	if d, ok := api.OutcomeFromError(err); ok {
		return a.outcomeErr(d)
	}
	st, _ := status.FromError(err)
	if e := messageTooLarge(st); e != nil {
		return e
	}
	switch st.Code() {
	case codes.Unavailable:
		return fail(exitUnavailable, "cannot reach writd at %s: %s: start writd there or pass --addr (env WRITCTL_ADDR)", a.addr, st.Message())
	case codes.DeadlineExceeded:
		return fail(exitUnavailable, "no answer from writd at %s within %s: retry or raise --timeout", a.addr, a.timeout)
	case codes.InvalidArgument, codes.FailedPrecondition:
		return fail(exitUsage, "%s", st.Message())
	case codes.OutOfRange:
		return fail(exitError, "%s", st.Message())
	}
	return fail(exitError, "%s: %s", st.Code(), st.Message())
}

func outcomeErr(d *writv1.OutcomeDetail) error {
	code := exitError
	switch d.Outcome {
	case writv1.Outcome_REJECTED:
		code = exitRejected
	case writv1.Outcome_UNAVAILABLE:
		code = exitUnavailable
	case writv1.Outcome_UNCERTAIN:
		code = exitUncertain
	case writv1.Outcome_NOT_COMMITTED:
		code = exitNotCommitted
	}
	msg := d.Outcome.String()
	if d.RequestId != "" {
		msg += " " + d.RequestId
	}
	if d.Reason != "" {
		msg += ": " + d.Reason
	}
	if d.LeaderApi != "" {
		msg += " (leader API " + d.LeaderApi + ")"
	}
	switch d.Outcome {
	case writv1.Outcome_UNCERTAIN:
		if d.RequestId == "" {
			msg += "; it may still commit: retry the same command (the payload's id field deduplicates it)"
			break
		}
		msg += "; it may still commit: look it up with `writctl outcome " + d.RequestId + "` or retry with --id " + d.RequestId
	case writv1.Outcome_UNAVAILABLE:
		msg += "; nothing was appended: it is safe to retry, with the same ID"
	case writv1.Outcome_NOT_COMMITTED:
		msg += "; it was not committed and never will be: it is safe to submit it again, with a new request ID"
	}
	return fail(code, "%s", msg)
}

func (a *app) printJSON(m proto.Message) error {
	b, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return err
	}
	return a.emitJSON(b)
}

func (a *app) printAny(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return a.emitJSON(b)
}

func (a *app) table() *tabwriter.Writer { return tabwriter.NewWriter(a.out, 2, 4, 2, ' ', 0) }

// readPayload resolves a payload argument: inline JSON, @file or - (stdin).
func (a *app) readPayload(arg string) ([]byte, error) {
	var b []byte
	var err error
	switch {
	case arg == "-":
		b, err = io.ReadAll(a.stdin)
	case strings.HasPrefix(arg, "@"):
		b, err = os.ReadFile(arg[1:])
	default:
		b = []byte(arg)
	}
	if err != nil {
		return nil, fail(exitUsage, "cannot read payload %s: %v", arg, err)
	}
	if err := checkPayloadSize(len(b)); err != nil {
		return nil, err
	}
	if !json.Valid(b) {
		return nil, fail(exitUsage, "payload is not valid JSON: pass a JSON object such as '{\"job_id\":\"j1\"}', @file or - for stdin")
	}
	return b, nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func (a *app) statusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the node's role, readiness, health and progress",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			s, err := call(a, writv1.WritClient.Status, &writv1.StatusRequest{})
			if err != nil {
				return err
			}
			if a.structured() {
				return a.printJSON(s)
			}
			role := "follower"
			if s.IsLeader {
				role = "leader"
			}
			w := a.table()
			fmt.Fprintf(w, "node\t%s (%s, term %d)\n", s.NodeId, role, s.Term)
			ready := yesNo(s.Ready)
			if !s.Ready && s.NotReadyReason != "" {
				ready += " (" + s.NotReadyReason + ")"
			}
			fmt.Fprintf(w, "ready\t%s\n", ready)
			fmt.Fprintf(w, "health\t%s\n", s.Health)
			if len(s.Insecure) > 0 {
				fmt.Fprintf(w, "WARNING\tinsecure: running without %s (docs/security.md)\n", strings.Join(s.Insecure, ", "))
			}
			leader := s.LeaderId
			if leader == "" {
				leader = "(none)"
			}
			fmt.Fprintf(w, "leader\t%s\tapi %s\n", leader, s.LeaderApi)
			fmt.Fprintf(w, "addresses\tapi %s\traft %s\tgossip %s\n", s.ApiAddr, s.RaftAddr, s.GossipAddr)
			fmt.Fprintf(w, "log\tcommit %d\tapplied %d\n", s.Commit, s.Applied)
			if s.CatchUp != nil {
				fmt.Fprintf(w, "catch-up\t%s\n", catchUpText(s.CatchUp))
			}
			fmt.Fprintf(w, "config\ttag %q\n", s.ConfigTag)
			if len(s.RestartRequired) > 0 {
				fmt.Fprintf(w, "restart required\t%s\n", strings.Join(s.RestartRequired, ", "))
			}
			fmt.Fprintf(w, "outbox\t%d facts\n", s.OutboxDepth)
			if ad := s.Admission; ad != nil {
				fmt.Fprintf(w, "admission\tinflight %d/%d\toutbox %d/%d facts, %d/%d bytes\trefused %d requests, %d facts\n",
					ad.Inflight, ad.MaxInflight, ad.OutboxEntries, ad.OutboxMaxEntries, ad.OutboxBytes, ad.OutboxMaxBytes, ad.RefusedRequests, ad.RefusedFacts)
			}
			fmt.Fprintf(w, "conflicts\t%d open\n", s.OpenConflicts)
			fmt.Fprintf(w, "schema\t%s\n", s.SchemaFingerprint)
			fmt.Fprintf(w, "version\t%s\n", s.Version)
			return w.Flush()
		},
	}
}

func (a *app) membersCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "members",
		Short: "List cluster members as gossip and consensus see them",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			m, err := call(a, writv1.WritClient.Members, &writv1.MembersRequest{})
			if err != nil {
				return err
			}
			if a.structured() {
				return a.printJSON(m)
			}
			return renderMembers(a.out, m)
		},
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "promote ID",
		Short: "Make a caught-up learner a voter (how nodes become voters with membership.auto_promote: false)",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			r, err := call(a, writv1.WritClient.PromoteMember, &writv1.PromoteMemberRequest{Id: args[0]})
			if err != nil {
				return err
			}
			if a.structured() {
				return a.printJSON(r)
			}
			_, err = fmt.Fprintf(a.out, "PROMOTED %s to voter (by leader %s)\n", r.GetId(), r.GetServedBy())
			return err
		},
	})
	return cmd
}

// renderMembers prints the members table and, below it, every refused node
// with its reason.
func renderMembers(out io.Writer, m *writv1.MembersResponse) error {
	w := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tSTATUS\tROLE\tLEADER\tAPI\tRAFT\tGOSSIP\tMATCH\tCATCH-UP\tREFUSED")
	for _, x := range m.Members {
		l := ""
		if x.Leader {
			l = "*"
		}
		role := x.Role
		if role == "" {
			role = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", x.Id, x.Status, role, l, x.ApiAddr, x.RaftAddr, x.GossipAddr, x.Match, catchUpText(x.CatchUp), x.Refused)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(m.Refused) == 0 {
		return nil
	}
	fmt.Fprintf(out, "\nrefused (%d): gossiping with the cluster but not admitted to raft\n", len(m.Refused))
	w = tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tGOSSIP\tRAFT\tSINCE\tREASON")
	for _, r := range m.Refused {
		since := "-"
		if r.SinceUnixMs > 0 {
			since = time.UnixMilli(r.SinceUnixMs).UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", r.Id, r.GossipAddr, r.RaftAddr, since, r.Reason)
	}
	return w.Flush()
}

func (a *app) pluginsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "plugins",
		Short: "List this node's handler plugins",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			r, err := call(a, writv1.WritClient.Plugins, &writv1.PluginsRequest{})
			if err != nil {
				return err
			}
			if a.structured() {
				return a.printJSON(r)
			}
			w := a.table()
			fmt.Fprintln(w, "NAME\tSTATE\tRESTARTS\tTYPES\tPATH")
			for _, p := range r.Plugins {
				fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", p.Name, p.State, p.Restarts, strings.Join(p.Types, ","), p.Path)
			}
			return w.Flush()
		},
	}
}
