// Package procenv owns the environment writ's own tools and tests give the
// writd and writctl processes they start: the parent's, without the
// variables those binaries read as configuration (WRIT_* for writd,
// WRITCTL_* for writctl), so that whatever the caller's shell or CI
// exports can never configure a child behind the command line's back.
package procenv

import (
	"os"
	"strings"
)

// configPrefixes are the variable prefixes writd and writctl read.
var configPrefixes = []string{"WRIT_", "WRITCTL_"}

// Clean returns os.Environ() without writd's and writctl's configuration
// variables.
func Clean() []string { return Without(os.Environ()) }

// Without returns env without writd's and writctl's configuration
// variables, in order.
func Without(env []string) []string {
	out := make([]string, 0, len(env))
next:
	for _, kv := range env {
		for _, p := range configPrefixes {
			if strings.HasPrefix(kv, p) {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}
