//go:build canary_replybeforecommit

package pipeline

// canaryReplyBeforeCommit is set only by the `canary_replybeforecommit` build tag, which
// exists solely so the conformance suite's own tests can prove that its
// check catches this deliberately broken build: requests are answered COMMITTED as soon as they are proposed, before commit and apply (breaks W1).
// Never set it in a build that serves requests.
const canaryReplyBeforeCommit = true
