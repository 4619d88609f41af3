package api

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/writ-dev/writ/api/writv1"
)

// PromoteMember makes a learner a voter. The raft leader serves it; a
// follower forwards it there with the caller's identity (the leader's
// audit line names the caller).
func (s *Server) PromoteMember(ctx context.Context, r *writv1.PromoteMemberRequest) (*writv1.PromoteMemberResponse, error) {
	id := strings.TrimSpace(r.GetId())
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "api: promote: id is required: name the learner's node ID (see writctl members)")
	}
	if s.cfg.Membership == nil {
		return nil, status.Error(codes.Unimplemented, "api: promote: this node runs without membership")
	}
	if c, addr := s.leaderConn(ctx); c != nil {
		resp, err := writv1.NewWritClient(c).PromoteMember(forwardCtx(ctx), &writv1.PromoteMemberRequest{Id: id})
		if reachedLeader(err) {
			return resp, err
		}
		return nil, status.Errorf(codes.Unavailable, "api: promote %s: the leader at %s is unreachable (%v): retry", id, addr, err)
	}
	if err := s.cfg.Membership.Promote(ctx, id); err != nil {
		if errors.Is(err, ErrNotLeader) {
			msg := "api: promote " + id + ": no raft leader is known to this node: retry"
			if l := s.cfg.Info.Route(ctx).LeaderAPI; l != "" {
				msg += " (leader API: " + l + ")"
			}
			return nil, status.Error(codes.FailedPrecondition, msg)
		}
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return nil, status.Errorf(codes.DeadlineExceeded, "api: promote %s: %v (the change may still apply: check writctl members)", id, err)
		}
		return nil, status.Errorf(codes.FailedPrecondition, "api: %v", err)
	}
	s.log.Info("api: member promoted", "member", id, "by", callerOf(ctx, ""))
	return &writv1.PromoteMemberResponse{Id: id, ServedBy: s.cfg.Info.Route(ctx).NodeID}, nil
}
