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
// its seed, the simulation replaces that package variable, while at least
// one world runs and no longer, with a reader that serves each goroutine
// running a world from that world's seeded source and every other
// goroutine from the reader it replaced. A world runs on one goroutine
// only, so the draws are in a fixed order.
//
// Only this package's tests import this package (TestNotLinkedIntoBinaries),
// so no writd or writctl process ever carries the hook.

var (
	hookMu   sync.Mutex
	hookBy   = map[uint64]*rand.Rand{}
	hookOrig io.Reader // the reader the hook replaced (kept after, for a caller that still holds the hook)
)

type dispatchReader struct{}

func (dispatchReader) Read(b []byte) (int, error) {
	hookMu.Lock()
	r, orig := hookBy[goid()], hookOrig
	hookMu.Unlock()
	if r != nil {
		return r.Read(b)
	}
	return orig.Read(b)
}

// bindRand makes raft's draws on this goroutine come from r until the
// returned function is called. The first binding installs the hook; the
// last unbinding puts the replaced reader back. Both writes of
// crypto/rand.Reader happen under hookMu while no world is bound, and
// every world's reads of it happen between its own bind and unbind.
func bindRand(r *rand.Rand) (unbind func()) {
	id := goid()
	hookMu.Lock()
	if len(hookBy) == 0 {
		hookOrig = crand.Reader
		crand.Reader = dispatchReader{}
	}
	hookBy[id] = r
	hookMu.Unlock()
	return func() {
		hookMu.Lock()
		defer hookMu.Unlock()
		delete(hookBy, id)
		if len(hookBy) == 0 {
			crand.Reader = hookOrig
		}
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
