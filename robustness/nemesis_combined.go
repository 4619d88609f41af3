package robustness

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"
)

// Combined injects a network fault and a process fault at once, each
// drawn, each picking its own victims (they may be the same node): a
// partition with a kill, a pause or a plugin kill inside it.
const Combined = "combined"

var (
	combinedNet  = []string{PartitionLeader, PartitionFollower, PartitionOneWay, PartitionBridge}
	combinedProc = []string{KillLeader, KillFollower, StopLeader, KillPlugin}
)

// combined runs one Combined fault: both halves to completion, the fault's
// record joining theirs (Parts holds each).
func (ne *nemesis) combined(ctx context.Context) Fault {
	kinds := []string{combinedNet[ne.rng.IntN(len(combinedNet))], combinedProc[ne.rng.IntN(len(combinedProc))]}
	parts := make([]Fault, len(kinds))
	var wg sync.WaitGroup
	for i, k := range kinds {
		// Each half draws from its own source, seeded from the run's.
		half := *ne
		half.rng = rand.New(rand.NewPCG(ne.rng.Uint64(), uint64(i)))
		wg.Add(1)
		go func() { defer wg.Done(); parts[i] = half.inject(ctx, k) }()
	}
	wg.Wait()
	f := Fault{Kind: Combined, At: parts[0].At, Healed: parts[0].Healed, Parts: parts}
	var errs []error
	var hold time.Duration
	seen := map[string]bool{}
	for _, p := range parts {
		f.At, f.Healed = min(f.At, p.At), max(f.Healed, p.Healed)
		if d, err := time.ParseDuration(p.Hold); err == nil {
			hold = max(hold, d)
		}
		for _, n := range p.Nodes {
			if !seen[n] {
				seen[n] = true
				f.Nodes = append(f.Nodes, n)
			}
		}
		if p.Error != "" {
			errs = append(errs, errors.New(p.Kind+": "+p.Error))
		}
	}
	f.Hold = hold.String()
	if err := errors.Join(errs...); err != nil {
		f.Error = err.Error()
	}
	return f
}
