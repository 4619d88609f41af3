//go:build !canary_reuseaccepted

package pipeline

// canaryReuseAccepted is set only by the `canary_reuseaccepted` build tag,
// which exists solely so the robustness suite's own tests can prove that
// its check catches this deliberately broken build: a request ID submitted
// again with another payload is answered as a retry of the first one
// (COMMITTED at its index) instead of REJECTED (breaks W3's idempotency).
// Never set it in a build that serves requests.
const canaryReuseAccepted = false
