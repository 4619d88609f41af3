//go:build linux

package host

import (
	"os/exec"
	"syscall"
)

// newCmd builds the plugin command. Pdeathsig makes the kernel SIGKILL the
// plugin when the node's launching thread dies, so a killed node leaves no
// orphan plugin behind. (The Go runtime does not retire threads unless a
// goroutine exits while locked to one; the host never does that.)
func newCmd(path string, args []string) *exec.Cmd {
	cmd := exec.Command(path, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}
