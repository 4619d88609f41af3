//go:build !canary_receiptdropped

package pipeline

// canaryReceiptDropped is set only by the `canary_receiptdropped` build
// tag, which exists solely so the conformance suite's own tests can prove
// that its cluster tier catches this deliberately broken build: a receipt
// item's commit timeout counts from the receipt's arrival, so the later
// items of a large receipt expire while still queued, and an item that ends
// without a log record has no watch event (breaks W4).
// Never set it in a build that serves requests.
const canaryReceiptDropped = false
