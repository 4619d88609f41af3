//go:build canary_raftackbeforefsync

package sim

// canaryAckBeforeFsync is set only by the `canary_raftackbeforefsync`
// build tag, which exists so that the simulation's own test can prove its
// checks catch this deliberately broken driver: the appender hands entries
// to raft's log storage and sends the append and vote responses (which
// promise durability) as soon as it has written them, before their fsync.
// A crash then loses what a quorum was counted on.
const canaryAckBeforeFsync = true
