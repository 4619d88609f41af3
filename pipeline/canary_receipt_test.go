package pipeline

import (
	"os/exec"
	"strings"
	"testing"
)

// TestReceiptCanaryFailsItsTest proves that the receipt regression test can
// fail: it builds this package with the canary_receiptdropped tag (a large
// receipt's items time out from its arrival while still queued, unseen on
// watch) and runs TestReceiptMaxItemsEveryOutcomeOnWatch_FakeLog, which
// must FAIL there; the normal build runs the same test as usual. The fake
// clock makes both deterministic, unlike a real cluster, where the canary
// shows only when the machine is slow enough.
func TestReceiptCanaryFailsItsTest(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the package with a canary tag: skipped with -short")
	}
	if canaryReceiptDropped {
		t.Skip("inside the canary build")
	}
	const target = "TestReceiptMaxItemsEveryOutcomeOnWatch_FakeLog"
	out, err := exec.Command("go", "test", "-count=1", "-tags", "canary_receiptdropped", "-run", "^"+target+"$", ".").CombinedOutput()
	if err == nil {
		t.Fatalf("%s passed in the canary_receiptdropped build; it must catch the canary:\n%s", target, out)
	}
	if !strings.Contains(string(out), "--- FAIL: "+target) {
		t.Fatalf("the canary build did not fail %s itself:\n%s", target, out)
	}
}
