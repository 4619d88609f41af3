//go:build strict

package pipeline

// buildStrict is set by the `strict` build tag (tests, conformance): an
// unclassified type at ingress panics instead of being handled as a fact.
const buildStrict = true

// StrictBuild reports whether the `strict` build tag is set.
const StrictBuild = buildStrict
