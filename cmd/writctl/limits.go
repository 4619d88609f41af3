package main

import (
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// apiMaxMessage is the largest message writd's API receives (gRPC's
// default receive limit, which writd keeps); a node accepts payloads up to
// nodeMaxPayload (its pipeline's limit) inside that.
const (
	apiMaxMessage  = 4 << 20
	nodeMaxPayload = 1 << 20
	// envelopeRoom is what an entry's type, ID and framing may take
	// next to the payload in one message.
	envelopeRoom = 4 << 10
)

// checkPayloadSize refuses, before anything is sent, a payload that
// cannot fit in one API message: one line with the limit and the fix, and
// the REJECTED exit code (nothing was appended).
func checkPayloadSize(n int) error {
	if n <= apiMaxMessage-envelopeRoom {
		return nil
	}
	return tooLarge(n)
}

func tooLarge(n int) error {
	return fail(exitRejected, "REJECTED: payload is %d bytes, over the API's %d-byte message limit (a node accepts payloads up to %d bytes); nothing was sent: split it into smaller entries",
		n, apiMaxMessage, nodeMaxPayload)
}

// messageTooLarge maps the server's refusal of an oversized message (a
// message the size check above could not foresee) to the same line.
func messageTooLarge(st *status.Status) error {
	if st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "larger than max") {
		return nil
	}
	return fail(exitRejected, "REJECTED: the request is over the API's %d-byte message limit (%s); nothing was appended: split it into smaller entries", apiMaxMessage, st.Message())
}
