//go:build !canary_factlostonrestart

package pipeline

// canaryFactLostOnRestart is set only by the `canary_factlostonrestart`
// build tag, which exists solely so the conformance suite's own tests can
// prove that its cluster tier catches this deliberately broken build: a
// node that restarts forgets the facts its outbox holds, so facts it
// acknowledged as received are never committed (breaks W3, W10).
// Never set it in a build that serves requests.
const canaryFactLostOnRestart = false
