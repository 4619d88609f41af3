//go:build unix

package main

import "syscall"

// privateUmask makes every file and directory writd (and the libraries it
// runs: the raft WAL, bbolt, serf's snapshot compaction) creates private to
// its user, whatever mode the code asks for.
func privateUmask() { syscall.Umask(0o077) }
