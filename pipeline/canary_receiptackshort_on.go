//go:build canary_receiptackshort

package pipeline

// canaryReceiptAckShort: see canary_receiptackshort_off.go. This build
// leaves the last item's ID out of a receipt's acknowledgement.
const canaryReceiptAckShort = true
