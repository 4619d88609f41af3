package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/writ-dev/writ/api/writv1"
	"github.com/writ-dev/writ/examples/jobs/jobsgen"
)

// TestVersion_AllBinaries builds writd, writctl and writ with the
// Makefile's -ldflags and checks `--version` and `version` on each report
// the stamped version, commit and date (and the schema fingerprint where
// the binary embeds a schema).
func TestVersion_AllBinaries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries: skipped with -short")
	}
	dir := t.TempDir()
	const v, c, d = "v9.8.7-test", "0123456789abcdef0123456789abcdef01234567", "2026-01-02T03:04:05Z"
	ld := "-X github.com/writ-dev/writ/version.version=" + v + " -X github.com/writ-dev/writ/version.commit=" + c + " -X github.com/writ-dev/writ/version.date=" + d
	build := exec.Command("go", "build", "-ldflags", ld, "-o", dir+"/", "github.com/writ-dev/writ/cmd/writd", "github.com/writ-dev/writ/cmd/writctl", "github.com/writ-dev/writ/cmd/writ")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	fp := jobsgen.Catalog().Fingerprint()
	for _, bin := range []string{"writd", "writctl", "writ"} {
		for _, arg := range []string{"--version", "version"} {
			var out bytes.Buffer
			cmd := exec.Command(filepath.Join(dir, bin), arg)
			cmd.Env = cleanEnv()
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s %s: %v\n%s", bin, arg, err, out.String())
			}
			s := out.String()
			for _, want := range []string{bin + " " + v + "\n", "commit  " + c + "\n", "built   " + d + "\n", "go      go"} {
				if !strings.Contains(s, want) {
					t.Errorf("%s %s printed %q; missing %q", bin, arg, s, want)
				}
			}
			if hasSchema := strings.Contains(s, "schema  "+fp+"\n"); hasSchema != (bin != "writctl") {
				t.Errorf("%s %s printed %q; schema fingerprint %s shown: %v", bin, arg, s, fp, hasSchema)
			}
		}
	}
}

// TestVersion_StatusReportsServerVersion: a running writd reports the
// version its --version prints in the Status RPC.
func TestVersion_StatusReportsServerVersion(t *testing.T) {
	c := newCluster(t, "127.0.17.9")
	p := c.nodes[0]
	out, err := exec.Command(filepath.Join(c.bin, "writd"), "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	first := strings.Fields(strings.SplitN(string(out), "\n", 2)[0])
	if len(first) != 2 || first[0] != "writd" {
		t.Fatalf("writd --version first line %q", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := p.client.Status(ctx, &writv1.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Version == "" || st.Version != first[1] {
		t.Fatalf("Status.Version = %q, want %q (writd --version)", st.Version, first[1])
	}
}
