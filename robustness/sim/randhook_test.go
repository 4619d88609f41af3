package sim

import (
	"bytes"
	crand "crypto/rand"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
)

// countingReader stands in for the operating system's reader so the test
// can see who was served from it.
type countingReader struct{ n atomic.Int64 }

func (c *countingReader) Read(b []byte) (int, error) {
	c.n.Add(1)
	for i := range b {
		b[i] = 0xAB
	}
	return len(b), nil
}

// TestRandHook_FakeReader: while a goroutine is bound, its draws from
// crypto/rand.Reader come from its seeded source and every other
// goroutine's from the reader the hook replaced; after the last unbind
// crypto/rand.Reader is that reader again.
func TestRandHook_FakeReader(t *testing.T) {
	orig := crand.Reader
	fake := &countingReader{}
	crand.Reader = fake
	defer func() { crand.Reader = orig }()

	unbind := bindRand(rand.New(rand.NewSource(42)))
	if crand.Reader == fake {
		t.Fatal("bindRand did not install the hook")
	}
	got := make([]byte, 16)
	if _, err := crand.Reader.Read(got); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 16)
	rand.New(rand.NewSource(42)).Read(want)
	if !bytes.Equal(got, want) || fake.n.Load() != 0 {
		t.Fatalf("the bound goroutine read %x (fake reader used %d times), want the seeded source's %x", got, fake.n.Load(), want)
	}
	var wg sync.WaitGroup
	other := make([]byte, 16)
	wg.Go(func() { _, _ = crand.Reader.Read(other) })
	wg.Wait()
	if fake.n.Load() != 1 || !bytes.Equal(other, bytes.Repeat([]byte{0xAB}, 16)) {
		t.Fatalf("another goroutine read %x (fake reader used %d times): it must be served by the replaced reader", other, fake.n.Load())
	}
	unbind()
	if crand.Reader != fake {
		t.Fatalf("after the last unbind crypto/rand.Reader is %T, want the reader it replaced", crand.Reader)
	}
}

// TestRandHookRestoredAfterRuns: after runs (several at once, as TestSim
// runs them) crypto/rand.Reader is the process's own reader again.
func TestRandHookRestoredAfterRuns(t *testing.T) {
	orig := crand.Reader
	var wg sync.WaitGroup
	for seed := range int64(4) {
		dir := t.TempDir()
		wg.Go(func() { Run(ConfigFor(seed+1, dir)) })
	}
	wg.Wait()
	if crand.Reader != orig {
		t.Fatalf("after the runs crypto/rand.Reader is %T, want the original %T", crand.Reader, orig)
	}
}
