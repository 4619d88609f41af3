//go:build canary_factlostonrestart

package pipeline

// canaryFactLostOnRestart: see canary_factlostonrestart_off.go. This build
// forgets the outbox's facts when the node starts.
const canaryFactLostOnRestart = true
