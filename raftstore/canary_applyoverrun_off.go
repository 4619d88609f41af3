//go:build !canary_applyoverrun

package raftstore

// canaryApplyOverrun is false in every normal build; see
// canary_applyoverrun_on.go.
const canaryApplyOverrun = false
