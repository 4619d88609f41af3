//go:build !linux

package host

import "os/exec"

// newCmd builds the plugin command. Outside Linux there is no Pdeathsig; the
// host kills its plugins on Close.
func newCmd(path string, args []string) *exec.Cmd {
	return exec.Command(path, args...)
}
