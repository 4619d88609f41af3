//go:build !canary_ackbeforefsync

package pipeline

// canaryAckBeforeFsync is set only by the `canary_ackbeforefsync` build tag, which
// exists solely so the conformance suite's own tests can prove that its
// check catches this deliberately broken build: the outbox acknowledges each batch of facts before writing and fsyncing it, making it durable only with the next batch (breaks W3).
// Never set it in a build that serves requests.
const canaryAckBeforeFsync = false
