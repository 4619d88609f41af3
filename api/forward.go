package api

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// forwardMayHaveLanded says whether a forwarded call that failed without an
// answer may still have reached the leader, and if so returns the reason
// to give the requester ("" when it certainly did not leave).
//
// gRPC fills the call's peer only once the call has a transport stream to
// the leader: the request was then written (or about to be) and the leader
// may have appended it before the connection failed. A follower that then
// finds no leader itself must answer UNCERTAIN, never UNAVAILABLE ("not
// appended"): the old leader's append can still be committed by the next
// one under the same request ID.
func forwardMayHaveLanded(leader *peer.Peer, addr string, err error) string {
	if leader == nil || leader.Addr == nil {
		return ""
	}
	msg := err.Error()
	if st, ok := status.FromError(err); ok {
		msg = st.Message()
	}
	return fmt.Sprintf("forwarded to the leader at %s, which failed before answering (%s); it may have appended the request: look the outcome up by request ID", addr, msg)
}

// leaderConn returns a connection to the leader when this call should be
// forwarded there.
func (s *Server) leaderConn(ctx context.Context) (*grpc.ClientConn, string) {
	if s.cfg.NoForward {
		return nil, ""
	}
	st := s.cfg.Info.Route(ctx)
	if st.IsLeader || st.LeaderAPI == "" || st.LeaderAPI == st.APIAddr {
		return nil, ""
	}
	// Checked after the route (the leader, which takes most calls, never
	// forwards) and without copying the call's metadata.
	if len(metadata.ValueFromIncomingContext(ctx, forwardedKey)) > 0 {
		return nil, ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.conns[st.LeaderAPI]; ok {
		return c, st.LeaderAPI
	}
	creds := s.cfg.ForwardCreds
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	c, err := grpc.NewClient(st.LeaderAPI, grpc.WithTransportCredentials(creds), boundDialer(st.APIAddr))
	if err != nil {
		s.log.Warn("api: cannot dial leader", "leader_api", st.LeaderAPI, "err", err)
		return nil, ""
	}
	s.conns[st.LeaderAPI] = c
	return c, st.LeaderAPI
}

// forwardCtx marks a call as forwarded and carries the caller's identity
// to the leader (auth.go).
func forwardCtx(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, append([]string{forwardedKey, "1"}, forwardMetadata(ctx)...)...)
}

// reachedLeader reports whether a forwarded call got an answer from the
// leader (as opposed to a transport failure before reaching it).
func reachedLeader(err error) bool {
	if err == nil {
		return true
	}
	if _, ok := OutcomeFromError(err); ok {
		return true
	}
	st, _ := status.FromError(err)
	return st.Code() != codes.Unavailable
}
