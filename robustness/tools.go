package robustness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// ensureTool makes bin available on PATH, installing Debian package pkg
// with apt-get when it is missing and the process may (root). It is how
// the suite gets the real tools its nemeses use (nft, strace).
func ensureTool(bin, pkg string) error {
	if _, err := exec.LookPath(bin); err == nil {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s is not installed and the suite is not root, so it cannot install %s", bin, pkg)
	}
	if _, err := exec.Command("apt-get", "install", "-y", pkg).CombinedOutput(); err != nil {
		// A fresh machine may have no package lists yet.
		if out, err := exec.Command("apt-get", "update").CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get update: %v: %s", err, lastLine(out))
		}
		if out, err := exec.Command("apt-get", "install", "-y", pkg).CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get install -y %s: %v: %s", pkg, err, lastLine(out))
		}
	}
	if _, err := exec.LookPath(bin); err != nil {
		return errors.New(pkg + " installed but " + bin + " is not on PATH")
	}
	return nil
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
