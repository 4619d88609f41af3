//go:build canary_watchdrops

package node

// canaryWatchDrops: see canary_watchdrops_off.go. This build is the
// broken one.
const canaryWatchDrops = true
