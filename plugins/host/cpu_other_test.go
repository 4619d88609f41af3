//go:build !linux

package host_test

import "time"

// cpuTime is not measured outside Linux; benchmarks then report zero CPU.
func cpuTime(int) time.Duration { return 0 }

// procCPU is not measured outside Linux.
func procCPU(int) time.Duration { return 0 }
