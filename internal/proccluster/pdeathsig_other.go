//go:build !linux

package proccluster

import "syscall"

// sysProcAttr: outside Linux there is no Pdeathsig; Stop and Kill are the
// only cleanup.
func sysProcAttr() *syscall.SysProcAttr { return nil }
