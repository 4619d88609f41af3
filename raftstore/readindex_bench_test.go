package raftstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkLinearizableGet measures linearizable reads of one key on a
// 3-node loopback cluster: readers on the leader and on a follower, 1 and
// 64 at a time. Concurrent reads share ReadIndex rounds (readindex.go).
func BenchmarkLinearizableGet(b *testing.B) {
	for _, follower := range []bool{false, true} {
		for _, readers := range []int{1, 64} {
			where := "leader"
			if follower {
				where = "follower"
			}
			b.Run(fmt.Sprintf("nodes=3/%s/readers=%d", where, readers), func(b *testing.B) {
				c := newCluster(b, 3, nil)
				li := c.leader(10 * time.Second)
				mustPropose(b, c.nodes[li], put("k", "reg/k", "v"))
				n := c.nodes[li]
				if follower {
					n = c.nodes[(li+1)%3]
				}
				ctx := context.Background()
				if _, _, err := n.Get(ctx, "reg/k", true); err != nil {
					b.Fatal(err)
				}
				var next atomic.Int64
				b.ResetTimer()
				var wg sync.WaitGroup
				for range readers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for next.Add(1) <= int64(b.N) {
							if _, _, err := n.Get(ctx, "reg/k", true); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reads/s")
			})
		}
	}
}
