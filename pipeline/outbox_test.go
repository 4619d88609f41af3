package pipeline

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestOutboxRestartReload: facts added to a real file survive closing and
// reopening; done facts do not come back; order is kept.
func TestOutboxRestartReload(t *testing.T) {
	dir := t.TempDir()
	ob, items, err := OpenOutbox(dir)
	if err != nil || len(items) != 0 {
		t.Fatalf("open: %v %v", items, err)
	}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, id := range []string{"a", "b", "c"} {
		if err := ob.Add(OutboxItem{ID: id, Type: "t", Payload: []byte(`{"x":"` + id + `"}`), Received: now}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ob.Done("b"); err != nil {
		t.Fatal(err)
	}
	if err := ob.Close(); err != nil {
		t.Fatal(err)
	}
	ob2, items, err := OpenOutbox(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ob2.Close()
	if len(items) != 2 || items[0].ID != "a" || items[1].ID != "c" || string(items[1].Payload) != `{"x":"c"}` || !items[0].Received.Equal(now) {
		t.Fatalf("reloaded %+v", items)
	}
}

// TestOutboxTornTail: a partially written record (crash mid-write, never
// acknowledged) is dropped on open; everything before it is kept.
func TestOutboxTornTail(t *testing.T) {
	dir := t.TempDir()
	ob, _, err := OpenOutbox(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.Add(OutboxItem{ID: "a", Type: "t", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	ob.Close()
	path := filepath.Join(dir, outboxFile)
	full := frame(addBody(&OutboxItem{ID: "b", Type: "t", Payload: []byte(`{"long":"payload"}`)}))
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.Write(full[:len(full)-3])
	f.Close()
	ob2, items, err := OpenOutbox(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 1 || items[0].ID != "a" {
		t.Fatalf("items after torn tail: %+v", items)
	}
	// The file was truncated: a new add after reopen is readable.
	if err := ob2.Add(OutboxItem{ID: "c", Type: "t", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	ob2.Close()
	_, items, err = OpenOutbox(dir)
	if err != nil || len(items) != 2 || items[1].ID != "c" {
		t.Fatalf("after append: %+v %v", items, err)
	}
}

// TestOutboxFsyncErrorNeverAcknowledged: an fsync failure is returned to
// the caller, and the outbox refuses every later fact.
func TestOutboxFsyncErrorNeverAcknowledged(t *testing.T) {
	ob, _, err := OpenOutbox(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	ob.sync = func(*os.File) error { return errors.New("EIO") }
	if err := ob.Add(OutboxItem{ID: "a", Type: "t"}); !errors.Is(err, ErrOutboxFailed) {
		t.Fatalf("add with failing fsync: %v", err)
	}
	ob.sync = (*os.File).Sync
	if err := ob.Add(OutboxItem{ID: "b", Type: "t"}); !errors.Is(err, ErrOutboxFailed) {
		t.Fatalf("add after failure must be refused: %v", err)
	}
	if ob.Len() != 0 {
		t.Fatalf("failed adds must not be retained in memory as accepted")
	}
}

// TestOutboxCompaction: many done records trigger a rewrite that keeps the
// live items.
func TestOutboxCompaction(t *testing.T) {
	dir := t.TempDir()
	ob, _, err := OpenOutbox(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.Add(OutboxItem{ID: "keep", Type: "t", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1100; i++ {
		id := "x" + string(rune('a'+i%26)) + time.Duration(i).String()
		if err := ob.Add(OutboxItem{ID: id, Type: "t"}); err != nil {
			t.Fatal(err)
		}
		if err := ob.Done(id); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := os.Stat(filepath.Join(dir, outboxFile))
	ob.Close()
	if st.Size() > 64<<10 {
		t.Fatalf("outbox not compacted: %d bytes", st.Size())
	}
	_, items, err := OpenOutbox(dir)
	if err != nil || len(items) != 1 || items[0].ID != "keep" {
		t.Fatalf("after compaction: %+v %v", items, err)
	}
}

// FuzzOutboxLoad: arbitrary file contents never panic the loader.
func FuzzOutboxLoad(f *testing.F) {
	f.Add(frame(addBody(&OutboxItem{ID: "a", Type: "t", Payload: []byte("{}")})))
	f.Add(frame([]byte{recDone, 1, 'a'}))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, outboxFile), data, 0o644); err != nil {
			t.Fatal(err)
		}
		ob, _, err := OpenOutbox(dir)
		if err == nil {
			ob.Close()
		}
	})
}

// TestOutboxGroupCommit: concurrent writers share fsyncs, every Add returns
// only after its record is durable, and a reopened outbox has them all.
func TestOutboxGroupCommit(t *testing.T) {
	dir := t.TempDir()
	ob, _, err := OpenOutbox(dir)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	syncs := 0
	ob.sync = func(f *os.File) error {
		mu.Lock()
		syncs++
		mu.Unlock()
		time.Sleep(time.Millisecond) // a slow disk makes writers queue up
		return f.Sync()
	}
	const n = 64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs <- ob.Add(OutboxItem{ID: fmt.Sprintf("f%d", i), Type: "t", Payload: []byte(`{}`)})
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if ob.Len() != n {
		t.Fatalf("len %d", ob.Len())
	}
	t.Logf("%d adds, %d fsyncs", n, syncs)
	if syncs >= n {
		t.Fatalf("no group commit: %d fsyncs for %d adds", syncs, n)
	}
	ob.Close()
	_, items, err := OpenOutbox(dir)
	if err != nil || len(items) != n {
		t.Fatalf("reopen: %d items, %v", len(items), err)
	}
}

// TestOutboxGroupFsyncFailureFailsEveryWaiter: when the shared fsync
// fails, no writer in the group is acknowledged.
func TestOutboxGroupFsyncFailureFailsEveryWaiter(t *testing.T) {
	ob, _, err := OpenOutbox(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	ob.sync = func(*os.File) error { time.Sleep(time.Millisecond); return errors.New("EIO") }
	var wg sync.WaitGroup
	var acked atomic.Int32
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if ob.Add(OutboxItem{ID: fmt.Sprintf("f%d", i), Type: "t"}) == nil {
				acked.Add(1)
			}
		}(i)
	}
	wg.Wait()
	if acked.Load() != 0 || ob.Len() != 0 {
		t.Fatalf("%d adds acknowledged despite fsync failure (len %d)", acked.Load(), ob.Len())
	}
}
