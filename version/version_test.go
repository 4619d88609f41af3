package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/writ-dev/writ", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-12-01T00:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	cases := []struct {
		name    string
		v, c, d string
		bi      *debug.BuildInfo
		want    Info
	}{
		{"linker values win", "v9.9.9", "deadbeef", "2027-01-01T00:00:00Z", bi, Info{"v9.9.9", "deadbeef", "2027-01-01T00:00:00Z", "go1.26.0"}},
		{"build info fallback", "", "", "", bi, Info{"v1.2.3", "abc123+dirty", "2026-12-01T00:00:00Z", "go1.26.0"}},
		{"devel build", "", "", "", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}}, Info{"dev", "unknown", "unknown", "go1.26.0"}},
	}
	for _, c := range cases {
		got := resolve(c.v, c.c, c.d, c.bi)
		if got != c.want {
			t.Errorf("%s: resolve = %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestText(t *testing.T) {
	s := Info{"v1", "c", "d", "go"}.Text("writd", "fp123")
	for _, want := range []string{"writd v1\n", "commit  c\n", "built   d\n", "schema  fp123\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("Text() = %q, missing %q", s, want)
		}
	}
	if strings.Contains(Info{"v1", "c", "d", "go"}.Text("writctl", ""), "schema") {
		t.Error("Text without a fingerprint mentions a schema")
	}
}
