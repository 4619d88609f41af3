//go:build !canary_guardterminalexit

package pipeline

// canaryGuardTerminalExit is set only by the `canary_guardterminalexit` build tag, which
// exists solely so the conformance suite's own tests can prove that its
// check catches this deliberately broken build: the guard lets an instance leave a terminal state for a non-terminal one (breaks W8).
// Never set it in a build that serves requests.
const canaryGuardTerminalExit = false
