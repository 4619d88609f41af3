package raftstore

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"

	"github.com/writ-dev/writ/kv"
)

// BenchmarkReplicate measures raw replication on a 3-node loopback cluster
// with WAL fsync on: each op proposes one command carrying a 256-byte value
// on the leader and waits until it is applied there. It reports throughput,
// latency percentiles and how many entries shared one WAL fsync.
func BenchmarkReplicate(b *testing.B) {
	for _, proposers := range []int{1, 64} {
		for _, peerTLS := range []bool{false, true} {
			name := fmt.Sprintf("nodes=3/proposers=%d", proposers)
			var mut func(int, *Config)
			if peerTLS {
				name += "/peer-tls"
				mut = peerTLSConfig(b)
			}
			benchReplicate(b, name, proposers, mut)
		}
	}
}

// benchReplicate runs one BenchmarkReplicate case (mut configures nodes).
func benchReplicate(b *testing.B, name string, proposers int, mut func(int, *Config)) {
	b.Run(name, func(b *testing.B) {
		c := newCluster(b, 3, mut)
		l := c.nodes[c.leader(10*time.Second)]
		mustPropose(b, l, put("warmup", "warmup", "x"))
		value := strings.Repeat("v", 256)
		lat := make([]time.Duration, b.N)
		var next atomic.Int64
		fs0, en0 := l.fsyncs.Load(), l.entries.Load()
		cpu0 := processCPU(b)
		b.ResetTimer()
		start := time.Now()
		var wg sync.WaitGroup
		for range proposers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx := context.Background()
				for {
					i := next.Add(1) - 1
					if i >= int64(b.N) {
						return
					}
					key := fmt.Sprintf("bench/%d", i)
					t0 := time.Now()
					p, err := l.Propose(ctx, []kv.Command{{ID: key, Effect: kv.Effect{Writes: []kv.Write{{Key: key, Value: []byte(value), Unconditional: true}}}}})
					if err != nil {
						b.Error(err)
						return
					}
					res, err := p.Wait(ctx)
					if err != nil || res[0].Status != kv.StatusApplied {
						b.Errorf("wait: %v %+v", err, res)
						return
					}
					lat[i] = time.Since(t0)
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		b.StopTimer()
		cpu := processCPU(b) - cpu0
		slices.Sort(lat)
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		// CPU time of the whole process (three nodes and the proposers)
		// per operation: what bounds throughput on a small machine, and
		// far less noisy than wall-clock numbers on a shared one.
		b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/op")
		if fs := l.fsyncs.Load() - fs0; fs > 0 {
			b.ReportMetric(float64(l.entries.Load()-en0)/float64(fs), "entries/fsync")
		}
	})
}

// processCPU is the user+system CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWALAppendFsync is the floor under every replication number: one
// etcd WAL append of a 256-byte entry with fsync, on this machine's disk.
func BenchmarkWALAppendFsync(b *testing.B) {
	w, err := wal.Create(zap.NewNop(), filepath.Join(b.TempDir(), "wal"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	data := []byte(strings.Repeat("v", 256))
	b.ResetTimer()
	for i := range b.N {
		idx := uint64(i + 1)
		e := &raftpb.Entry{Index: new(idx), Term: new(uint64(1)), Type: new(raftpb.EntryNormal), Data: data}
		if err := w.Save(&raftpb.HardState{Term: new(uint64(1)), Commit: new(idx)}, []*raftpb.Entry{e}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWALAppendFsyncThreeWriters is the floor under BenchmarkReplicate
// when its three in-process nodes share one disk: three WALs append and
// fsync at once, as a leader and two followers do for every batch. ns/op
// is the time for all three appends of one round; on a disk that
// serializes flushes it approaches three single fsyncs.
func BenchmarkWALAppendFsyncThreeWriters(b *testing.B) {
	const writers = 3
	ws := make([]*wal.WAL, writers)
	for i := range ws {
		w, err := wal.Create(zap.NewNop(), filepath.Join(b.TempDir(), "wal"), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close()
		ws[i] = w
	}
	data := []byte(strings.Repeat("v", 256))
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range b.N {
				idx := uint64(i + 1)
				e := &raftpb.Entry{Index: new(idx), Term: new(uint64(1)), Type: new(raftpb.EntryNormal), Data: data}
				if err := w.Save(&raftpb.HardState{Term: new(uint64(1)), Commit: new(idx)}, []*raftpb.Entry{e}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
