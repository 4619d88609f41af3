//go:build canary_reuseaccepted

package pipeline

// canaryReuseAccepted: see canary_reuseaccepted_off.go. This build is the
// broken one.
const canaryReuseAccepted = true
