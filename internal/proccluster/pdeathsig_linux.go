package proccluster

import "syscall"

// sysProcAttr makes the kernel SIGKILL a node when the process that started
// it dies, so a killed test binary does not leak its cluster.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
