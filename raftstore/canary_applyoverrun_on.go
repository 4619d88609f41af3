//go:build canary_applyoverrun

package raftstore

// canaryApplyOverrun is set only by the `canary_applyoverrun` build tag, which
// exists solely so the suites' own tests can prove that they catch this
// deliberately broken build: the apply arena hands out a fresh chunk without
// checking that it holds the bytes asked for, so applying a value of a few
// KiB panics with "slice bounds out of range".
// Never set it in a build that serves requests.
const canaryApplyOverrun = true
