package robustness

import (
	"os/exec"
	"strings"
	"testing"
)

// TestRemoveStaleTables: a suite table whose process is gone is deleted; the
// suite's table of a live process and any other table stay.
func TestRemoveStaleTables(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft not installed")
	}
	live := tablePrefix + "1_7" // pid 1 is alive
	for _, tb := range []string{tablePrefix + "999999999_5", live, "writ_robustness_keep"} {
		if err := nft("add", "table", "inet", tb); err != nil {
			t.Skipf("cannot add nftables tables here: %v", err)
		}
	}
	defer func() {
		_ = nft("delete", "table", "inet", live)
		_ = nft("delete", "table", "inet", "writ_robustness_keep")
	}()
	if err := removeStaleTables(); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command("nft", "list", "tables").CombinedOutput()
	s := string(out)
	if strings.Contains(s, tablePrefix+"999999999_5") || !strings.Contains(s, live) || !strings.Contains(s, "writ_robustness_keep") {
		t.Fatalf("tables after cleanup:\n%s", s)
	}
}
