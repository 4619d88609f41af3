package api

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/internal/reqid"
	"github.com/writ-dev/writ/internal/writemux"
)

// MaxPayload is the largest entry payload the API accepts.
const MaxPayload = 1 << 20

// forwardedKey marks a call that a follower already forwarded once.
const forwardedKey = "writ-forwarded"

// Config wires a Server to one node.
type Config struct {
	Writer Writer
	Store  Store
	Info   Info
	// Membership serves refused nodes and the gossip keyring; nil means
	// Keyring answers FailedPrecondition and Members lists no refusals.
	Membership Membership
	Logger     *slog.Logger
	// NoForward disables forwarding to the leader (requests are processed
	// locally).
	NoForward bool
	// Schema, if set, serves the Schema RPC: the fingerprint and model of
	// the schema this node runs. nil answers Unimplemented.
	Schema func() (fingerprint string, model []byte)
	// Gate, if set, is asked about every submitted, reported or delivered
	// entry type before anything else (forwarding included): a non-empty
	// answer REJECTS the entry with that reason. Nodes use it to refuse a
	// type some member of a mixed-schema cluster cannot apply.
	Gate func(entryType string) string
	// ForwardCreds secure the connection a follower forwards calls to the
	// leader on (nil: plaintext).
	ForwardCreds credentials.TransportCredentials
	// Reflection registers gRPC server reflection.
	Reflection bool
	// Intercept, if set, runs around every call on a Write stream as the
	// server's unary interceptors run around a unary call (Auth.Unary:
	// authentication, roles, the audit line).
	Intercept grpc.UnaryServerInterceptor
	// MaxStreamCalls bounds the calls one Write stream has in flight
	// (0: DefaultMaxStreamCalls), and those a follower forwards on its
	// stream to the leader.
	MaxStreamCalls int
	// NoForwardStream forwards each write to the leader as a unary call
	// instead of on one Write stream per leader.
	NoForwardStream bool
}

// Server implements writv1.WritServer over one node.
type Server struct {
	writv1.UnimplementedWritServer
	cfg Config
	log *slog.Logger

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
	muxes map[string]*writemux.Mux // forwarding streams, by leader address

	draining  chan struct{} // closed by Drain
	drainOnce sync.Once
}

var _ writv1.WritServer = (*Server)(nil)

// New checks cfg and returns a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Writer == nil || cfg.Store == nil || cfg.Info == nil {
		return nil, errors.New("api: Config needs Writer, Store and Info")
	}
	l := cfg.Logger
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, log: l, conns: map[string]*grpc.ClientConn{}, muxes: map[string]*writemux.Mux{}, draining: make(chan struct{})}, nil
}

// Register adds the writ.v1 service, and server reflection when
// configured, to g.
func (s *Server) Register(g *grpc.Server) {
	writv1.RegisterWritServer(g, s)
	if s.cfg.Reflection {
		reflection.Register(g)
	}
}

// Close releases connections to other nodes.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for a, m := range s.muxes {
		m.Close()
		delete(s.muxes, a)
	}
	for a, c := range s.conns {
		_ = c.Close()
		delete(s.conns, a)
	}
}

// NewID returns a fresh ID with the given prefix: 32 hex digits, a
// millisecond clock followed by 80 random bits (internal/reqid: IDs made
// together sort together in the outcome table).
func NewID(prefix string) string { return reqid.New(prefix) }

// StatusError builds the gRPC status for a writ outcome, with an
// OutcomeDetail attached.
func StatusError(e *Error) error {
	code := codes.Unknown
	switch e.Outcome {
	case Rejected:
		code = codes.FailedPrecondition
		if e.Field != "" {
			code = codes.InvalidArgument
		}
	case Unavailable:
		code = codes.Unavailable
		if e.Exhausted {
			code = codes.ResourceExhausted
		}
	case Uncertain:
		code = codes.DeadlineExceeded
	case NotCommitted:
		code = codes.Aborted
	case Committed:
		code = codes.OK
	}
	msg := e.Reason
	if e.LeaderAPI != "" {
		msg += " (leader API: " + e.LeaderAPI + ")"
	}
	st := status.New(code, msg)
	d := &writv1.OutcomeDetail{Outcome: e.Outcome, RequestId: e.ID, Reason: e.Reason, Field: e.Field, LeaderApi: e.LeaderAPI}
	if wd, err := st.WithDetails(d); err == nil {
		st = wd
	}
	return st.Err()
}

// OutcomeFromError extracts the writ outcome detail from a gRPC error
// returned by any writ.v1 call.
func OutcomeFromError(err error) (*writv1.OutcomeDetail, bool) { return writv1.OutcomeFromError(err) }

// toStatus maps a backend error to a gRPC status.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if e, ok := AsError(err); ok {
		return StatusError(e)
	}
	if ce := (*CompactedError)(nil); errors.As(err, &ce) {
		return status.Error(codes.OutOfRange, ce.Error())
	}
	if errors.Is(err, context.Canceled) {
		return status.Error(codes.Canceled, err.Error())
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Internal, err.Error())
}

// entry validates the wire entry and decodes it to JSON.
// An empty idPrefix leaves an empty ID empty: the write path then takes the
// ID from the payload's declared id field (facts, receipts).
func (s *Server) entry(w *writv1.Entry, idPrefix string) (Entry, error) {
	if w == nil {
		return Entry{}, StatusError(&Error{Outcome: Rejected, Field: "entry", Reason: "entry is required: set entry.type and entry.payload"})
	}
	if w.GetType() == "" {
		return Entry{}, StatusError(&Error{Outcome: Rejected, Field: "entry.type", Reason: "entry.type is required: name a declared entry type such as job.submit"})
	}
	if len(w.GetPayload()) > MaxPayload {
		return Entry{}, StatusError(&Error{Outcome: Rejected, ID: w.GetId(), Field: "entry.payload",
			Reason: fmt.Sprintf("payload is %d bytes, the limit is %d: send a smaller payload", len(w.GetPayload()), MaxPayload)})
	}
	e := Entry{Type: w.GetType(), ID: w.GetId(), Payload: w.GetPayload(), Binary: w.GetEncoding() == writv1.Encoding_BINARY}
	if s.cfg.Gate != nil {
		if why := s.cfg.Gate(e.Type); why != "" {
			return Entry{}, StatusError(&Error{Outcome: Rejected, ID: e.ID, Field: "entry.type", Reason: why})
		}
	}
	if e.ID == "" && idPrefix != "" {
		e.ID = NewID(idPrefix)
	}
	return e, nil
}

// Submit runs a request-class entry and replies only with its outcome.
func (s *Server) Submit(ctx context.Context, r *writv1.SubmitRequest) (*writv1.SubmitResponse, error) {
	e, err := s.entry(r.GetEntry(), "r-")
	if err != nil {
		return nil, err
	}
	var sent string // non-empty: a forward may have reached the leader
	if c, addr := s.leaderConn(ctx); c != nil {
		fr := &writv1.SubmitRequest{Entry: &writv1.Entry{Type: e.Type, Id: e.ID, Payload: e.Payload, Encoding: r.GetEntry().GetEncoding()}, TimeoutMs: r.GetTimeoutMs()}
		resp, landed, ferr := forwardWrite(s, ctx, c, addr, len(e.Payload), &writv1.WriteRequest{Call: &writv1.WriteRequest_Submit{Submit: fr}},
			(*writv1.WriteResponse).GetSubmit, func(ctx context.Context, opts ...grpc.CallOption) (*writv1.SubmitResponse, error) {
				return writv1.NewWritClient(c).Submit(ctx, fr, opts...)
			})
		if reachedLeader(ferr) {
			return resp, ferr
		}
		s.log.Info("api: leader unreachable, processing locally", "request_id", e.ID, "type", e.Type, "leader_api", addr, "err", ferr)
		sent = landed
	}
	res := s.cfg.Writer.Submit(ctx, e, time.Duration(r.GetTimeoutMs())*time.Millisecond)
	if res.ID == "" {
		res.ID = e.ID
	}
	if sent != "" && res.Outcome == Unavailable {
		// This node appended nothing, but the leader it forwarded to may
		// have: "definitely not appended" would be a lie (W2).
		res.Outcome, res.Reason = Uncertain, sent+"; here: "+res.Reason
	}
	if res.Outcome != Committed {
		le := &Error{Outcome: res.Outcome, ID: res.ID, Reason: res.Reason, Field: res.Field}
		if res.Outcome == writv1.Outcome_OUTCOME_UNSPECIFIED {
			le.Outcome = Uncertain
		}
		if le.Outcome == Unavailable {
			le.LeaderAPI = s.cfg.Info.Route(ctx).LeaderAPI
		}
		return nil, StatusError(le)
	}
	return &writv1.SubmitResponse{Outcome: Committed, RequestId: res.ID, Index: res.Index, Result: res.Result, Reason: res.Reason, ServedBy: s.cfg.Info.Route(ctx).NodeID}, nil
}

// Report accepts a fact into this node's outbox (never forwarded: W3).
func (s *Server) Report(ctx context.Context, r *writv1.ReportRequest) (*writv1.ReportResponse, error) {
	e, err := s.entry(r.GetEntry(), "")
	if err != nil {
		return nil, err
	}
	res, err := s.cfg.Writer.Report(ctx, e)
	if err != nil {
		return nil, toStatus(err)
	}
	if res.ID == "" {
		res.ID = e.ID
	}
	return &writv1.ReportResponse{Received: true, FactId: res.ID, NodeId: s.cfg.Info.Route(ctx).NodeID, OutboxDepth: res.OutboxDepth}, nil
}

// Deliver accepts a receipt; item outcomes go to Watch (W4).
func (s *Server) Deliver(ctx context.Context, r *writv1.DeliverRequest) (*writv1.DeliverResponse, error) {
	e, err := s.entry(r.GetEntry(), "")
	if err != nil {
		return nil, err
	}
	if c, addr := s.leaderConn(ctx); c != nil {
		fr := &writv1.DeliverRequest{Entry: &writv1.Entry{Type: e.Type, Id: e.ID, Payload: e.Payload, Encoding: r.GetEntry().GetEncoding()}}
		resp, _, ferr := forwardWrite(s, ctx, c, addr, len(e.Payload), &writv1.WriteRequest{Call: &writv1.WriteRequest_Deliver{Deliver: fr}},
			(*writv1.WriteResponse).GetDeliver, func(ctx context.Context, opts ...grpc.CallOption) (*writv1.DeliverResponse, error) {
				return writv1.NewWritClient(c).Deliver(ctx, fr, opts...)
			})
		if reachedLeader(ferr) {
			return resp, ferr
		}
		s.log.Info("api: leader unreachable, processing locally", "request_id", e.ID, "type", e.Type, "leader_api", addr, "err", ferr)
	}
	res, err := s.cfg.Writer.Deliver(ctx, e)
	if err != nil {
		return nil, toStatus(err)
	}
	if res.ID == "" {
		res.ID = e.ID
	}
	return &writv1.DeliverResponse{Received: true, RequestId: res.ID, Items: uint32(len(res.ItemIDs)), ItemIds: res.ItemIDs}, nil
}

// Watch streams committed outcomes.
func (s *Server) Watch(r *writv1.WatchRequest, stream grpc.ServerStreamingServer[writv1.WatchEvent]) error {
	f := WatchFilter{From: r.GetFromIndex(), Types: r.GetTypes(), Key: r.GetKey()}
	err := s.cfg.Writer.Watch(stream.Context(), f, func(ev WatchEvent) error {
		return stream.Send(&writv1.WatchEvent{Index: ev.Index, Type: ev.Type, Key: ev.Key, Id: ev.ID, Status: ev.Status, Reason: ev.Reason, Class: ev.Class})
	})
	if err != nil && stream.Context().Err() != nil {
		return nil
	}
	return toStatus(err)
}

// Get reads one key, linearizable unless serializable is asked for.
func (s *Server) Get(ctx context.Context, r *writv1.GetRequest) (*writv1.GetResponse, error) {
	if r.GetKey() == "" {
		return nil, status.Error(codes.InvalidArgument, "key is required: name a key such as job/<job_id>")
	}
	rec, ok, err := s.cfg.Store.Get(ctx, r.GetKey(), !r.GetSerializable())
	if err != nil {
		return nil, readStatus(err)
	}
	if !ok {
		return &writv1.GetResponse{}, nil
	}
	return &writv1.GetResponse{Found: true, Record: &writv1.Record{Key: rec.Key, Value: rec.Value, Rev: rec.Rev}}, nil
}

// List reads every key under a prefix.
func (s *Server) List(ctx context.Context, r *writv1.ListRequest) (*writv1.ListResponse, error) {
	recs, err := s.cfg.Store.List(ctx, r.GetPrefix(), !r.GetSerializable())
	if err != nil {
		return nil, readStatus(err)
	}
	out := &writv1.ListResponse{Records: make([]*writv1.Record, 0, len(recs))}
	for _, rec := range recs {
		out.Records = append(out.Records, &writv1.Record{Key: rec.Key, Value: rec.Value, Rev: rec.Rev})
	}
	return out, nil
}

func readStatus(err error) error {
	if _, ok := AsError(err); ok {
		return toStatus(err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return toStatus(err)
	}
	return status.Error(codes.Unavailable, err.Error()+": retry, or read with serializable=true")
}

// Outcome returns the recorded outcome of a request or fact ID.
func (s *Server) Outcome(ctx context.Context, r *writv1.OutcomeRequest) (*writv1.OutcomeResponse, error) {
	if r.GetRequestId() == "" {
		return nil, status.Error(codes.InvalidArgument, "request_id is required")
	}
	res, ok, err := s.cfg.Writer.Outcome(ctx, OutcomeQuery{ID: r.GetRequestId(), Serializable: r.GetSerializable(), Settle: r.GetSettle()})
	if err != nil {
		return nil, readStatus(err)
	}
	if !ok {
		return &writv1.OutcomeResponse{}, nil
	}
	return &writv1.OutcomeResponse{Known: true, Outcome: res.Outcome, Index: res.Index, Status: res.Status, Reason: res.Reason}, nil
}

// Conflicts lists open conflict cases.
func (s *Server) Conflicts(ctx context.Context, _ *writv1.ConflictsRequest) (*writv1.ConflictsResponse, error) {
	recs, err := s.cfg.Writer.Conflicts(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &writv1.ConflictsResponse{}
	for _, rec := range recs {
		out.Conflicts = append(out.Conflicts, &writv1.Conflict{Key: rec.Key, Rev: rec.Rev, Case: rec.Value})
	}
	return out, nil
}

// Outbox describes this node's fact outbox.
func (s *Server) Outbox(ctx context.Context, _ *writv1.OutboxRequest) (*writv1.OutboxResponse, error) {
	o, err := s.cfg.Writer.Outbox(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &writv1.OutboxResponse{NodeId: s.cfg.Info.Route(ctx).NodeID, Depth: o.Depth, OldestAgeMs: o.OldestAge.Milliseconds()}
	for _, f := range o.Facts {
		out.Facts = append(out.Facts, &writv1.OutboxFact{Id: f.ID, Type: f.Type, AgeMs: f.Age.Milliseconds(), Attempts: f.Attempts})
	}
	return out, nil
}

// Status reports this node's state and readiness.
func (s *Server) Status(ctx context.Context, req *writv1.StatusRequest) (*writv1.StatusResponse, error) {
	if req.GetWithoutStateHash() {
		ctx = WithoutStateHash(ctx)
	}
	st := s.cfg.Info.Status(ctx)
	return &writv1.StatusResponse{
		NodeId: st.Log.NodeID, LeaderId: st.Log.LeaderID, IsLeader: st.Log.IsLeader, Term: st.Log.Term,
		Commit: st.Log.Commit, Applied: st.Log.Applied, Ready: st.Ready, NotReadyReason: st.NotReadyReason,
		Health: st.Health, ApiAddr: st.APIAddr, LeaderApi: st.LeaderAPI, RaftAddr: st.RaftAddr,
		GossipAddr: st.GossipAddr, SchemaFingerprint: st.Fingerprint, ConfigTag: st.ConfigTag,
		OutboxDepth: st.OutboxDepth, OpenConflicts: st.OpenConflicts, Version: st.Version,
		RestartRequired: st.RestartRequired, StateHash: st.StateHash, StateIndex: st.StateIndex,
		Insecure:  st.Insecure,
		Admission: st.Admission,
		CatchUp:   st.CatchUp,
	}, nil
}

// Members lists the nodes gossip and consensus know about.
func (s *Server) Members(ctx context.Context, _ *writv1.MembersRequest) (*writv1.MembersResponse, error) {
	out := &writv1.MembersResponse{}
	for _, m := range s.cfg.Info.Members(ctx) {
		out.Members = append(out.Members, &writv1.Member{Id: m.ID, RaftAddr: m.RaftAddr, ApiAddr: m.APIAddr, GossipAddr: m.GossipAddr,
			Role: m.Role, Status: m.Status, Match: m.Match, Leader: m.Leader, SchemaFingerprint: m.Fingerprint, Refused: m.Refused, CatchUp: m.CatchUp})
	}
	if s.cfg.Membership != nil {
		for _, r := range s.cfg.Membership.Refused(ctx) {
			w := &writv1.Refusal{Id: r.ID, GossipAddr: r.GossipAddr, RaftAddr: r.RaftAddr, SchemaFingerprint: r.Fingerprint, Reason: r.Reason}
			if !r.Since.IsZero() {
				w.SinceUnixMs = r.Since.UnixMilli()
			}
			out.Refused = append(out.Refused, w)
		}
	}
	return out, nil
}

// CheckKey validates a base64 gossip key: standard base64 of 16, 24 or 32
// bytes. The error names the argument and the fix.
func CheckKey(key string) error {
	k := strings.TrimSpace(key)
	if k == "" {
		return errors.New("key is required: pass a base64 key of 16, 24 or 32 bytes, e.g. from `head -c 32 /dev/urandom | base64`")
	}
	b, err := base64.StdEncoding.DecodeString(k)
	if err != nil {
		return fmt.Errorf("key is not valid base64 (%v): pass the standard base64 encoding of 16, 24 or 32 random bytes, e.g. from `head -c 32 /dev/urandom | base64`", err)
	}
	switch len(b) {
	case 16, 24, 32:
		return nil
	}
	return fmt.Errorf("key decodes to %d bytes: a gossip key must be 16, 24 or 32 bytes (AES-128/192/256); generate one with `head -c 32 /dev/urandom | base64`", len(b))
}

// Keyring runs a gossip keyring operation across the cluster. It is served
// by the node it reaches (gossip carries it to every other node), so it is
// never forwarded.
func (s *Server) Keyring(ctx context.Context, r *writv1.KeyringRequest) (*writv1.KeyringResponse, error) {
	op := r.GetOp()
	switch op {
	case KeyList, KeyInstall, KeyUse, KeyRemove:
	default:
		return nil, status.Errorf(codes.InvalidArgument, "op %v: use LIST, INSTALL, USE or REMOVE", op)
	}
	key := strings.TrimSpace(r.GetKey())
	if op != KeyList {
		if err := CheckKey(key); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
	}
	if s.cfg.Membership == nil {
		return nil, status.Error(codes.FailedPrecondition, ErrNotEncrypted.Error())
	}
	if op == KeyRemove {
		// Refuse to remove a key some node still encrypts with: that node
		// would lose its only way to talk to the others.
		lr, err := s.cfg.Membership.Keyring(ctx, KeyList, "")
		if err != nil {
			return nil, keyringStatus(err)
		}
		if n := lr.PrimaryKeys[key]; n > 0 {
			return nil, status.Errorf(codes.FailedPrecondition,
				"key %s is the primary key (used to encrypt gossip) on %d of %d nodes and cannot be removed: make another installed key primary first with `writctl keyring use --key-file NEWKEYFILE`", KeyFingerprint(key), n, lr.NumNodes)
		}
	}
	rep, err := s.cfg.Membership.Keyring(ctx, op, key)
	if err != nil {
		return nil, keyringStatus(err)
	}
	// Keys leave the node only as fingerprints, never as key material.
	out := &writv1.KeyringResponse{Op: op, NumNodes: uint32(rep.NumNodes), NumResp: uint32(rep.NumResp), NumErr: uint32(rep.NumErr), Messages: rep.Messages}
	out.Keys = fingerprintCounts(rep.Keys)
	out.PrimaryKeys = fingerprintCounts(rep.PrimaryKeys)
	if op != KeyList {
		out.Fingerprint = KeyFingerprint(key)
	}
	return out, nil
}

// fingerprintCounts maps per-key node counts to per-fingerprint counts.
func fingerprintCounts(m map[string]int) map[string]uint32 {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]uint32, len(m))
	for k, n := range m {
		out[KeyFingerprint(k)] += uint32(n)
	}
	return out
}

func keyringStatus(err error) error {
	if errors.Is(err, ErrNotEncrypted) {
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return toStatus(err)
	}
	// Not every node confirmed: the operation is idempotent, rerun it.
	return status.Error(codes.Aborted, err.Error())
}

// Plugins lists this node's handler plugins.
func (s *Server) Plugins(ctx context.Context, _ *writv1.PluginsRequest) (*writv1.PluginsResponse, error) {
	out := &writv1.PluginsResponse{}
	for _, p := range s.cfg.Info.Plugins(ctx) {
		out.Plugins = append(out.Plugins, &writv1.Plugin{Name: p.Name, Path: p.Path, State: p.State, Types: p.Types, Sha256: p.SHA256, Restarts: p.Restarts})
	}
	return out, nil
}

// ConfigShow returns the committed configuration.
func (s *Server) ConfigShow(ctx context.Context, r *writv1.ConfigShowRequest) (*writv1.ConfigShowResponse, error) {
	var c ConfigState
	var err error
	if ts, ok := s.cfg.Writer.(ConfigTypeShower); ok {
		c, err = ts.ConfigShowType(ctx, r.GetType())
	} else if r.GetType() != "" {
		return nil, StatusError(&Error{Outcome: Rejected, Field: "type", Reason: "this node shows only the cluster configuration: omit the type"})
	} else {
		c, err = s.cfg.Writer.ConfigShow(ctx)
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return &writv1.ConfigShowResponse{Tag: c.Tag, Document: c.Document, Index: c.Index, Activated: c.Activated, Type: c.Type}, nil
}

// ConfigUpgrade runs a configuration change through the config class and
// streams its phases.
func (s *Server) ConfigUpgrade(r *writv1.ConfigUpgradeRequest, stream grpc.ServerStreamingServer[writv1.ConfigProgress]) error {
	ctx := stream.Context()
	if len(r.GetDocument()) == 0 {
		return StatusError(&Error{Outcome: Rejected, Field: "document", Reason: "document is empty: send the new configuration file"})
	}
	id := r.GetRequestId()
	if id == "" {
		id = NewID("c-")
	}
	var sent string // non-empty: the forward may have reached the leader
	var leader peer.Peer
	if c, addr := s.leaderConn(ctx); c != nil {
		fr := &writv1.ConfigUpgradeRequest{RequestId: id, Document: r.GetDocument(), Format: r.GetFormat(), TimeoutMs: r.GetTimeoutMs(), Type: r.GetType(), Force: r.GetForce()}
		fs, ferr := writv1.NewWritClient(c).ConfigUpgrade(forwardCtx(ctx), fr, grpc.Peer(&leader))
		if ferr == nil {
			first := true
			for {
				p, rerr := fs.Recv()
				if rerr != nil {
					if first && !reachedLeader(rerr) {
						ferr = rerr
						break
					}
					if errors.Is(rerr, io.EOF) {
						return nil
					}
					return rerr
				}
				first = false
				if err := stream.Send(p); err != nil {
					return err
				}
			}
		}
		s.log.Info("api: leader unreachable, processing config upgrade locally", "leader_api", addr, "err", ferr)
		sent = forwardMayHaveLanded(&leader, addr, ferr)
	}
	send := func(p ConfigProgress) {
		_ = stream.Send(progressToWire(p))
	}
	final, err := s.cfg.Writer.ConfigUpgrade(ctx, ConfigChange{ID: id, Document: r.GetDocument(), Format: r.GetFormat(), Timeout: time.Duration(r.GetTimeoutMs()) * time.Millisecond, Type: r.GetType(), Force: r.GetForce()}, send)
	if err != nil {
		return toStatus(err)
	}
	if sent != "" && final.Outcome == Unavailable {
		final.Outcome, final.Message = Uncertain, sent+"; here: "+final.Message
	}
	return stream.Send(progressToWire(final))
}

func progressToWire(p ConfigProgress) *writv1.ConfigProgress {
	return &writv1.ConfigProgress{Phase: p.Phase, Message: p.Message, Tag: p.Tag, CommittedBy: p.CommittedBy, Of: p.Of,
		RestartRequired: p.RestartRequired, Outcome: p.Outcome, Index: p.Index, ActiveOn: p.ActiveOn, Members: p.Members}
}
