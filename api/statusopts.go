package api

import "context"

type stateHashKey struct{}

// WithoutStateHash marks ctx so that Info.Status skips the applied-state
// hash (a full pass over the state): for callers that poll.
func WithoutStateHash(ctx context.Context) context.Context {
	return context.WithValue(ctx, stateHashKey{}, true)
}

// StateHashSkipped reports whether ctx asks Status to skip the state hash.
func StateHashSkipped(ctx context.Context) bool {
	v, _ := ctx.Value(stateHashKey{}).(bool)
	return v
}
