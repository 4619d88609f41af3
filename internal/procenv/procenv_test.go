package procenv

import (
	"slices"
	"testing"
)

func TestWithoutDropsOnlyConfigurationVariables(t *testing.T) {
	in := []string{"PATH=/bin", "WRIT_LOG_LEVEL=debug", "WRITCTL_ADDR=x:1", "WRITE=1", "HOME=/root", "XWRIT_A=1"}
	got := Without(in)
	want := []string{"PATH=/bin", "WRITE=1", "HOME=/root", "XWRIT_A=1"}
	if !slices.Equal(got, want) {
		t.Fatalf("Without(%q) = %q, want %q", in, got, want)
	}
}

func TestCleanOmitsAnExportedWritVariable(t *testing.T) {
	t.Setenv("WRIT_NODE_ID", "from-the-shell")
	t.Setenv("PROCENV_TEST_KEEP", "1")
	env := Clean()
	if slices.Contains(env, "WRIT_NODE_ID=from-the-shell") {
		t.Fatal("Clean kept WRIT_NODE_ID")
	}
	if !slices.Contains(env, "PROCENV_TEST_KEEP=1") {
		t.Fatal("Clean dropped an unrelated variable")
	}
}
