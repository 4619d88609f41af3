//go:build canary_latchreleasewritten

package pipeline

// canaryLatchReleaseWritten is set only by the `canary_latchreleasewritten`
// build tag, which exists solely so that TestReadLatchesReleasedAtAppend_Raft
// can prove it catches this deliberately broken build: at the append an
// entry releases the latches of the keys it writes too, so the next entry
// on such a key is evaluated against state without the write in flight.
// Never set it in a build that serves requests.
const canaryLatchReleaseWritten = true
