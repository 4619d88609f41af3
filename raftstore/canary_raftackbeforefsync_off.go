//go:build !canary_raftackbeforefsync

package raftstore

// canaryRaftAckBeforeFsync: see canary_raftackbeforefsync_on.go.
const canaryRaftAckBeforeFsync = false
