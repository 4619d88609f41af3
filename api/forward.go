package api

import (
	"fmt"

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
