package client

import (
	"crypto/rand"
	"encoding/hex"
)

// RequestIDPrefix starts every request ID NewRequestID returns.
const RequestIDPrefix = "r-"

// NewRequestID returns a fresh request ID: RequestIDPrefix and 128 random
// bits in hex. Generate it before sending, keep it, and reuse it for every
// retry of the same request.
func NewRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return RequestIDPrefix + hex.EncodeToString(b[:])
}
