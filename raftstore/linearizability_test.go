package raftstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/writ-dev/writ/kv"
)

type regInput struct {
	put   bool
	key   string
	value string
}

type regOutput struct {
	value   string
	found   bool
	unknown bool // a put whose outcome the client never learned
}

// registerModel: one register per key; a put with an unknown outcome may or
// may not have taken effect.
var registerModel = porcupine.NondeterministicModel{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			k := op.Input.(regInput).key
			if _, ok := by[k]; !ok {
				keys = append(keys, k)
			}
			by[k] = append(by[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() []any { return []any{""} },
	Step: func(state, input, output any) []any {
		st, in, out := state.(string), input.(regInput), output.(regOutput)
		if in.put {
			if out.unknown {
				return []any{st, in.value}
			}
			return []any{in.value}
		}
		if (st == "" && !out.found) || (out.found && out.value == st) {
			return []any{st}
		}
		return nil
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		if in.put {
			return fmt.Sprintf("put(%s,%s) unknown=%v", in.key, in.value, out.unknown)
		}
		return fmt.Sprintf("get(%s) -> %q found=%v", in.key, out.value, out.found)
	},
}

// TestLinearizableHistory records puts (Propose+Wait) and linearizable gets
// issued concurrently on every node of a 3-node cluster, across a leader
// restart, and checks the history with porcupine.
func TestLinearizableHistory(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.leader(10 * time.Second)
	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }
	var mu, nodesMu sync.Mutex
	var history []porcupine.Operation
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for client := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(client), 7))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				nodesMu.Lock()
				n := c.nodes[r.IntN(3)]
				nodesMu.Unlock()
				key := fmt.Sprintf("reg/%d", r.IntN(3))
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				call := now()
				op := porcupine.Operation{ClientId: client, Call: call}
				if r.IntN(2) == 0 {
					val := fmt.Sprintf("c%d-%d", client, i)
					op.Input = regInput{put: true, key: key, value: val}
					p, err := n.Propose(ctx, []kv.Command{put("", key, val)})
					switch {
					case err != nil && (errors.Is(err, kv.ErrNoLeader) || errors.Is(err, kv.ErrDropped)):
						op.Input = nil // definitely not appended: no effect
					case err != nil:
						op.Output, op.Return = regOutput{unknown: true}, math.MaxInt64
					default:
						res, werr := p.Wait(ctx)
						if werr != nil {
							op.Output, op.Return = regOutput{unknown: true}, math.MaxInt64
						} else if res[0].Status != kv.StatusApplied {
							t.Errorf("unconditional put: %+v", res[0])
						} else {
							op.Output, op.Return = regOutput{}, now()
						}
					}
				} else {
					op.Input = regInput{key: key}
					rec, ok, err := n.Get(ctx, key, true)
					if err != nil {
						op.Input = nil // a failed read observed nothing
					} else {
						op.Output, op.Return = regOutput{value: string(rec.Value), found: ok}, now()
					}
				}
				cancel()
				if op.Input != nil {
					mu.Lock()
					history = append(history, op)
					mu.Unlock()
				} else {
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	nodesMu.Lock()
	li := c.leader(10 * time.Second)
	nodesMu.Unlock()
	c.stop(li) // the stopped node's clients see ErrStopped → unknown puts
	time.Sleep(1000 * time.Millisecond)
	nodesMu.Lock()
	c.start(li)
	nodesMu.Unlock()
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	puts, gets := 0, 0
	for _, op := range history {
		if op.Input.(regInput).put {
			puts++
		} else {
			gets++
		}
	}
	if puts < 20 || gets < 20 {
		t.Fatalf("too little load to judge: %d puts, %d gets", puts, gets)
	}
	res := porcupine.CheckOperationsTimeout(registerModel.ToModel(), history, 60*time.Second)
	t.Logf("%d puts, %d linearizable gets: %s", puts, gets, res)
	switch res {
	case porcupine.Illegal:
		t.Fatal("history is not linearizable")
	case porcupine.Unknown:
		t.Fatal("linearizability check timed out: the history was not verified")
	}
}
