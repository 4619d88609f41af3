//go:build canary_receiptdropped

package pipeline

// canaryReceiptDropped: see canary_receiptdropped_off.go. This build times
// receipt items from the receipt's arrival and keeps the outcomes of items
// that end without a log record off the watch stream.
const canaryReceiptDropped = true
