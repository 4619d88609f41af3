//go:build canary_outcomestalecache

package pipeline

// canaryOutcomeStaleCache: see canary_outcomestalecache_off.go. This build
// answers Outcome from the node's own outcome cache ahead of the
// replicated outcome table, and never refreshes an answer the cache holds.
const canaryOutcomeStaleCache = true
