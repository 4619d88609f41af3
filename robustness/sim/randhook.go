package sim

import (
	crand "crypto/rand"
	"io"
	"math/rand"
	"runtime"
	"strconv"
	"sync"
)

// etcd raft draws each randomized election timeout from crypto/rand.Reader
// (raft.go, globalRand), with no seam of its own. For a run to repeat from
// its seed, the simulation replaces that package variable, once, with a
// reader that serves each goroutine running a world from that world's
// seeded source and every other goroutine from the original reader. A
// world runs on one goroutine only, so the draws are in a fixed order.

var (
	hookOnce sync.Once
	hookMu   sync.Mutex
	hookBy   = map[uint64]*rand.Rand{}
	hookOrig io.Reader
)

type dispatchReader struct{}

func (dispatchReader) Read(b []byte) (int, error) {
	if r := worldRand(); r != nil {
		return r.Read(b)
	}
	return hookOrig.Read(b)
}

func worldRand() *rand.Rand {
	hookMu.Lock()
	defer hookMu.Unlock()
	if len(hookBy) == 0 {
		return nil
	}
	return hookBy[goid()]
}

// bindRand makes raft's draws on this goroutine come from r until the
// returned function is called.
func bindRand(r *rand.Rand) (unbind func()) {
	hookOnce.Do(func() {
		hookOrig = crand.Reader
		crand.Reader = dispatchReader{}
	})
	id := goid()
	hookMu.Lock()
	hookBy[id] = r
	hookMu.Unlock()
	return func() {
		hookMu.Lock()
		delete(hookBy, id)
		hookMu.Unlock()
	}
}

// goid is the current goroutine's ID, from its stack header
// ("goroutine 18 [running]:").
func goid() uint64 {
	var buf [64]byte
	s := buf[:runtime.Stack(buf[:], false)]
	const p = len("goroutine ")
	if len(s) <= p {
		return 0
	}
	s = s[p:]
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	id, _ := strconv.ParseUint(string(s[:i]), 10, 64)
	return id
}
