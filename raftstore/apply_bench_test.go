package raftstore

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/writ-dev/writ/kv"
)

// BenchmarkApplyCommands is the apply transaction's cost per command over
// a real state.db: batches of 64 commands shaped like job.submit (two
// conditional creates with 256-byte values and a recorded outcome), no
// checker, committed every 4,096 commands as the applier does at most.
// cpu-ns/cmd (the process's CPU time) is steadier than ns/cmd on a busy
// machine.
func BenchmarkApplyCommands(b *testing.B) {
	s, err := openState(filepath.Join(b.TempDir(), "state.db"), 100000)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.close() }()
	val := make([]byte, 256)
	const batch = 64
	cmds := make([]kv.Command, batch)
	index := uint64(0)
	b.ReportAllocs()
	cpu0 := processCPU(b)
	for i := 0; b.Loop(); i++ {
		for j := range cmds {
			n := i*batch + j
			cmds[j] = kv.Command{ID: fmt.Sprintf("req:r-%08x", uint32(n)*2654435761), Effect: kv.Effect{Writes: []kv.Write{
				{Key: fmt.Sprintf("job/j%d", n), Value: val},
				{Key: fmt.Sprintf("_m/job/j%d", n), Value: val[:64]},
			}}}
		}
		index++
		if err := s.apply(1, func(a *applyTx) error {
			if _, err := a.applyCommands(index, cmds, nil); err != nil {
				return err
			}
			return a.finish()
		}); err != nil {
			b.Fatal(err)
		}
		if i%(4096/batch) == 0 {
			if err := s.flush(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/cmd")
	b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(b.N*batch), "cpu-ns/cmd")
}

// BenchmarkApplyCommit is apply plus the bbolt commit, as the applier runs
// them at a few thousand writes a second: batches of 32 job-shaped
// commands, each batch committed, over an outcome table already at its
// retention (100,000), so every new record also trims the oldest. The
// sub-benchmarks differ only in the command IDs: random (128 random bits,
// as request IDs were), or time-ordered (a millisecond clock, then random
// bits), whose new records and trims land on the same few pages.
func BenchmarkApplyCommit(b *testing.B) {
	for _, ids := range []string{"random", "ordered"} {
		b.Run("ids="+ids, func(b *testing.B) {
			const retention, batch = 100000, 32
			s, err := openState(filepath.Join(b.TempDir(), "state.db"), retention)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = s.close() }()
			rnd := rand.New(rand.NewPCG(1, 2))
			clock := uint64(1_700_000_000_000)
			id := func() string {
				if ids == "random" {
					return fmt.Sprintf("req:r-%016x%016x", rnd.Uint64(), rnd.Uint64())
				}
				clock += uint64(rnd.IntN(2)) // several commands a millisecond
				return fmt.Sprintf("req:r-%012x%020x", clock, rnd.Uint64())
			}
			val := make([]byte, 256)
			cmds := make([]kv.Command, batch)
			index, n := uint64(0), 0
			step := func() {
				for j := range cmds {
					cmds[j] = kv.Command{ID: id(), Effect: kv.Effect{Writes: []kv.Write{
						{Key: fmt.Sprintf("job/j%d", n), Value: val},
						{Key: fmt.Sprintf("_m/job/j%d", n), Value: val[:64]},
					}}}
					n++
				}
				index++
				if err := s.apply(1, func(a *applyTx) error {
					if _, err := a.applyCommands(index, cmds, nil); err != nil {
						return err
					}
					return a.finish()
				}); err != nil {
					b.Fatal(err)
				}
				if err := s.flush(); err != nil {
					b.Fatal(err)
				}
			}
			for n < retention+batch {
				step()
			}
			b.ReportAllocs()
			cpu0 := processCPU(b)
			b.ResetTimer()
			for b.Loop() {
				step()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/cmd")
			b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(b.N*batch), "cpu-ns/cmd")
		})
	}
}
