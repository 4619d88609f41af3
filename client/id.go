package client

import "github.com/writ-dev/writ/internal/reqid"

// RequestIDPrefix starts every request ID NewRequestID returns.
const RequestIDPrefix = "r-"

// NewRequestID returns a fresh request ID: RequestIDPrefix and 32 hex
// digits, a millisecond clock followed by 80 random bits, so that IDs made
// at about the same time sort together (which keeps the cluster's outcome
// table cheap to update). Generate it before sending, keep it, and reuse
// it for every retry of the same request.
func NewRequestID() string { return reqid.New(RequestIDPrefix) }
