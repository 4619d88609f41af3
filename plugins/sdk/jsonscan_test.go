package sdk

import (
	"os"
	"strings"
	"testing"
)

// TestJSONScanIsTheGeneratorsCopy keeps the SDK's JSON syntax check one
// piece of code with the generator's: jsonscan_gen.go must be
// schema/gen/internal/jsonscan/scan.go after its package clause.
func TestJSONScanIsTheGeneratorsCopy(t *testing.T) {
	src, err := os.ReadFile("../../schema/gen/internal/jsonscan/scan.go")
	if err != nil {
		t.Fatal(err)
	}
	cp, err := os.ReadFile("jsonscan_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	const srcClause, cpClause = "package jsonscan\n", "package sdk\n"
	s, c := string(src), string(cp)
	si, ci := strings.Index(s, srcClause), strings.Index(c, cpClause)
	if si < 0 || ci < 0 {
		t.Fatal("a package clause is missing")
	}
	if s[si+len(srcClause):] != c[ci+len(cpClause):] {
		t.Fatal("plugins/sdk/jsonscan_gen.go differs from schema/gen/internal/jsonscan/scan.go: run go generate ./plugins/sdk")
	}
}
