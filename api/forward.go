package api

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/internal/writemux"
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
	return mayHaveLanded(addr, err)
}

// mayHaveLanded is the reason given for a forward that may have reached
// the leader at addr and failed with err before answering.
func mayHaveLanded(addr string, err error) string {
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

// forwardStreamMaxPayload is the largest payload forwarded on the
// forwarding stream; a larger one is forwarded as a unary call, so that it
// does not hold up the calls behind it (messages on one stream go one
// after another).
const forwardStreamMaxPayload = 64 << 10

// forwardMux is the Write stream this follower forwards writes to the
// leader at addr on; nil when forwarding streams are off.
func (s *Server) forwardMux(c *grpc.ClientConn, addr string) *writemux.Mux {
	if s.cfg.NoForwardStream {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.muxes[addr]; ok {
		return m
	}
	m := writemux.New(c, s.maxStreamCalls(), func(ctx context.Context) metadata.MD {
		// The stream is opened as its first call would be sent: marked
		// forwarded, with that caller's credentials. Every call on it
		// carries its own (WriteRequest.metadata) and is checked alone.
		return metadata.Pairs(append([]string{forwardedKey, "1"}, forwardMetadata(ctx)...)...)
	})
	s.muxes[addr] = m
	return m
}

// forwardWrite forwards one Submit or Deliver to the leader at addr: on
// the forwarding stream (the call's metadata, as forwardCtx would send
// it, in WriteRequest.metadata), or as a unary call when the stream is
// off, refused or too small for the payload. landed is set when the call
// failed without an answer but may have reached the leader.
func forwardWrite[R comparable](s *Server, ctx context.Context, c *grpc.ClientConn, addr string, payload int, req *writv1.WriteRequest,
	get func(*writv1.WriteResponse) R, unary func(ctx context.Context, opts ...grpc.CallOption) (R, error)) (resp R, landed string, err error) {
	if m := s.forwardMux(c, addr); m != nil && payload <= forwardStreamMaxPayload {
		md := append([]string{forwardedKey, "1"}, forwardMetadata(ctx)...)
		for i := 0; i+1 < len(md); i += 2 {
			req.Metadata = append(req.Metadata, &writv1.MetadataEntry{Key: md[i], Value: md[i+1]})
		}
		var sent atomic.Bool
		r, err := m.Call(ctx, req, &sent)
		switch {
		case err == nil:
			if err := writemux.ReplyErr(r); err != nil {
				return resp, "", err
			}
			if out := get(r); out != resp {
				return out, "", nil
			}
			return resp, mayHaveLanded(addr, writemux.Mismatched(r)), writemux.Mismatched(r)
		case streamRefused(err) && !sent.Load():
			// an older leader, or credentials the stream was not opened
			// with: forward this call unary
		default:
			if sent.Load() {
				landed = mayHaveLanded(addr, err)
			}
			return resp, landed, err
		}
	}
	var leader peer.Peer
	resp, err = unary(forwardCtx(ctx), grpc.Peer(&leader))
	if err != nil {
		landed = forwardMayHaveLanded(&leader, addr, err)
	}
	return resp, landed, err
}

// streamRefused reports whether a forwarding stream call failed without
// being sent because the leader serves no Write stream or refused to
// open one (a call's own refusal comes as its answer, not as this error).
func streamRefused(err error) bool {
	if errors.Is(err, writemux.ErrNoStream) {
		return true
	}
	switch status.Code(err) {
	case codes.Unauthenticated, codes.PermissionDenied, codes.Unimplemented:
		return true
	}
	return false
}
