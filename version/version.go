// Package version reports what a writ binary was built from: the module
// version, the VCS commit and the build date. The Makefile sets them with
// -ldflags "-X github.com/writ-dev/writ/version.version=… -X …commit=…
// -X …date=…"; a plain `go build` or `go install` falls back to what
// runtime/debug.ReadBuildInfo recorded (module version, vcs.revision,
// vcs.time, vcs.modified).
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set by the linker (see the package comment).
var (
	version string
	commit  string
	date    string
)

// Info is a binary's build.
type Info struct {
	Version   string // module version, e.g. v0.3.0, or "dev"
	Commit    string // VCS revision ("unknown" when not recorded), "+dirty" when modified
	Date      string // build or commit date (RFC 3339), "unknown" when not recorded
	GoVersion string
}

// Get returns the build information: linker values first, then the build
// info the toolchain embedded.
func Get() Info {
	return resolve(version, commit, date, readBuildInfo())
}

func readBuildInfo() *debug.BuildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	return bi
}

func resolve(v, c, d string, bi *debug.BuildInfo) Info {
	in := Info{Version: v, Commit: c, Date: d, GoVersion: runtime.Version()}
	if bi != nil {
		if in.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			in.Version = bi.Main.Version
		}
		var rev, t string
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				t = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if in.Commit == "" && rev != "" {
			in.Commit = rev
			if dirty {
				in.Commit += "+dirty"
			}
		}
		if in.Date == "" {
			in.Date = t
		}
		if bi.GoVersion != "" {
			in.GoVersion = bi.GoVersion
		}
	}
	if in.Version == "" {
		in.Version = "dev"
	}
	if in.Commit == "" {
		in.Commit = "unknown"
	}
	if in.Date == "" {
		in.Date = "unknown"
	}
	return in
}

// String is the one-line form, e.g. "v0.3.0 (commit 1a2b3c4…, built
// 2026-12-01T10:00:00Z, go1.26.0)".
func (i Info) String() string {
	return fmt.Sprintf("%s (commit %s, built %s, %s)", i.Version, i.Commit, i.Date, i.GoVersion)
}

// Text is what `NAME --version` and `NAME version` print: the binary's
// name and build, and the schema fingerprint when the binary embeds one.
func (i Info) Text(name, fingerprint string) string {
	s := fmt.Sprintf("%s %s\n  commit  %s\n  built   %s\n  go      %s\n", name, i.Version, i.Commit, i.Date, i.GoVersion)
	if fingerprint != "" {
		s += fmt.Sprintf("  schema  %s\n", fingerprint)
	}
	return s
}
