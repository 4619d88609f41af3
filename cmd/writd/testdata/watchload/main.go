// Command watchload holds many Watch streams on a writd, each replaying
// the node's retained history from the start over and over, and prints
// the number of events received once a second (the watcher load test runs
// it as a separate process so its CPU use is not the test's).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/writ-dev/writ/api/writv1"
)

func main() {
	addr := flag.String("addr", "", "writd API address")
	watchers := flag.Int("watchers", 200, "Watch streams")
	conns := flag.Int("conns", 10, "connections the streams share")
	history := flag.Int("history", 1000, "events to read before starting over")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var got atomic.Int64
	for c := 0; c < *conns; c++ {
		conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			fmt.Fprintln(os.Stderr, "watchload:", err)
			os.Exit(2)
		}
		cl := writv1.NewWritClient(conn)
		for i := 0; i < *watchers / *conns; i++ {
			go func() {
				for ctx.Err() == nil {
					wc, err := cl.Watch(ctx, &writv1.WatchRequest{})
					if err != nil {
						time.Sleep(10 * time.Millisecond)
						continue
					}
					for k := 0; k < *history; k++ {
						if _, err := wc.Recv(); err != nil {
							break
						}
						got.Add(1)
					}
				}
			}()
		}
	}
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fmt.Println("replayed", got.Load())
		}
	}
}
