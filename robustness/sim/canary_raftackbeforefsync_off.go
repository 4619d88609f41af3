//go:build !canary_raftackbeforefsync

package sim

// canaryAckBeforeFsync: see canary_raftackbeforefsync_on.go.
const canaryAckBeforeFsync = false
