//go:build canary_dupnoadvance

package pipeline

// canaryDupNoAdvance is set only by the `canary_dupnoadvance` build tag, which
// exists solely so the conformance suite's own tests can prove that its
// check catches this deliberately broken build: a newer report of the current state is a duplicate that does not advance the recorded order, so a later older report of another state applies (breaks W8).
// Never set it in a build that serves requests.
const canaryDupNoAdvance = true
