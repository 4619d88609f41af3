//go:build !canary_outcomestalecache

package pipeline

// canaryOutcomeStaleCache is set only by the `canary_outcomestalecache`
// build tag, which exists solely so the robustness suite's own test
// (TestRobustnessCatchesOutcomeStaleCache) can prove that its check
// catches this deliberately broken build: Outcome answers from the node's
// own outcome cache (the answer it gave a client, or an earlier lookup)
// before consulting the replicated outcome table, and a later apply or
// snapshot does not refresh what the cache holds, so a node that answered
// UNCERTAIN or UNAVAILABLE keeps saying so for an ID committed or fenced
// since (breaks W2: Outcome must answer from the replicated table).
// Never set it in a build that serves requests.
const canaryOutcomeStaleCache = false
