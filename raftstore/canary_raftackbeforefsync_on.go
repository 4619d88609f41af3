//go:build canary_raftackbeforefsync

package raftstore

// canaryRaftAckBeforeFsync is set only by the `canary_raftackbeforefsync`
// build tag, which exists solely so the deterministic simulation's own test
// can prove that it catches this deliberately broken build: the appender
// sends its responses to peers (append acknowledgements and votes) before
// it writes and fsyncs the WAL, so a leader can count a follower's copy of
// an entry towards commit while it is still only in that follower's memory.
// Never set it in a build that serves requests.
const canaryRaftAckBeforeFsync = true
