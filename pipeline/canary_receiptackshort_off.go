//go:build !canary_receiptackshort

package pipeline

// canaryReceiptAckShort is set only by the `canary_receiptackshort` build
// tag, which exists solely so the robustness suite's own tests can prove
// that its receipt-items check catches this deliberately broken build: a
// receipt of two or more items is acknowledged with the last item's ID
// left out, so the caller cannot follow that item's outcome on the watch
// stream (breaks W4). The item itself is still carried.
// Never set it in a build that serves requests.
const canaryReceiptAckShort = false
