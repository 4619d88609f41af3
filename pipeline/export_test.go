package pipeline

import "os"

// FakeOutboxIO is the test seam of an outbox's file: write and fsync
// replace the real ones (nil keeps the real one), so a test injects the
// failures of a failing disk into a real file.
func FakeOutboxIO(o *Outbox, write func(*os.File, []byte) (int, error), sync func(*os.File) error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if write != nil {
		o.write = write
	}
	if sync != nil {
		o.sync = sync
	}
}
