package api

import (
	"context"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/writ-dev/writ/api/writv1"
)

// ConflictResolution is one request to close a conflict case.
type ConflictResolution struct {
	Key    string
	Reason string
	// By is who resolves it: the name the caller gave (or "anonymous")
	// and the caller's address.
	By string
	// ApplyIncoming also applies the case's retained incoming fact (an
	// audited guard override, see pipeline.ResolveRequest).
	ApplyIncoming bool
	Timeout       time.Duration
}

// ResolveResult is the outcome of a ConflictResolution, with the case as
// resolved (JSON).
type ResolveResult struct {
	SubmitResult
	Case []byte
}

// ConflictResolver is implemented by writers that close conflict cases.
type ConflictResolver interface {
	ResolveConflict(ctx context.Context, r ConflictResolution) ResolveResult
}

// callerOf names the caller for an audit record: the name it gave (else
// "anonymous") and the peer address the call came from.
func callerOf(ctx context.Context, name string) string {
	name = strings.TrimSpace(name)
	if id, ok := IdentityFrom(ctx); ok && id.Name != "" {
		// An authenticated caller is recorded by its identity; a --by
		// name it gives is kept beside it, never instead of it.
		if name != "" && name != id.Name {
			name = id.Name + " as " + name
		} else {
			name = id.Name
		}
	}
	if name == "" {
		name = "anonymous"
	}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		name += " (" + p.Addr.String() + ")"
	}
	return name
}

// ResolveConflict closes a conflict case through the log (a request-class
// command), audited with who, when and why.
func (s *Server) ResolveConflict(ctx context.Context, r *writv1.ResolveConflictRequest) (*writv1.ResolveConflictResponse, error) {
	cr, ok := s.cfg.Writer.(ConflictResolver)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "api: this node cannot resolve conflict cases")
	}
	if strings.TrimSpace(r.GetKey()) == "" {
		return nil, StatusError(&Error{Outcome: Rejected, Field: "key", Reason: "key is required: name the case, e.g. _conflict/job/j1 (writctl conflicts list)"})
	}
	if strings.TrimSpace(r.GetReason()) == "" {
		return nil, StatusError(&Error{Outcome: Rejected, Field: "reason", Reason: "reason is required: say why the case is closed (writctl conflicts resolve KEY --reason TEXT)"})
	}
	res := cr.ResolveConflict(ctx, ConflictResolution{Key: r.GetKey(), Reason: r.GetReason(), By: callerOf(ctx, r.GetBy()),
		ApplyIncoming: r.GetApplyIncoming(), Timeout: time.Duration(r.GetTimeoutMs()) * time.Millisecond})
	if res.Outcome != Committed {
		le := &Error{Outcome: res.Outcome, ID: res.ID, Reason: res.Reason, Field: res.Field}
		if le.Outcome == writv1.Outcome_OUTCOME_UNSPECIFIED {
			le.Outcome = Uncertain
		}
		return nil, StatusError(le)
	}
	return &writv1.ResolveConflictResponse{Outcome: Committed, Index: res.Index, Reason: res.Reason, Case: res.Case}, nil
}
