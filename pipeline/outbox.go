package pipeline

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// The outbox is a node's durable queue of accepted facts not yet known to be
// committed (W3). It is one append-only file, outbox.log, in the data
// directory. Each record is
//
//	uint32 length | uint32 CRC-32C(body) | body
//
// with body = kind (1 add, 2 done) followed by the fields. A fact is
// acknowledged only after its add record is fsync'd. A torn tail (a record
// that was being written when the node crashed, and was therefore never
// acknowledged) is truncated on open. When most records are done the file is
// rewritten (temporary file, fsync, rename, directory fsync).

const (
	outboxFile      = "outbox.log"
	recAdd     byte = 1
	recDone    byte = 2
	// maxOutboxRecord bounds one record; larger lengths mean corruption.
	maxOutboxRecord = 64 << 20
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// OutboxItem is one retained fact.
type OutboxItem struct {
	// ID is the command ID (deduplicates application).
	ID       string
	Type     string
	Payload  []byte // JSON
	Received time.Time
}

// Outbox is the durable fact queue. It is safe for concurrent use.
type Outbox struct {
	mu   sync.Mutex
	cond *sync.Cond // on mu: a group fsync finished
	dir  string
	f    *os.File
	live map[string]*OutboxItem
	seq  map[string]uint64 // write order of live items
	done int
	// failed refuses every later write: the storage failure (an
	// *OutboxError, and then broken is closed) or the outbox being closed.
	failed error
	broken chan struct{}
	// onFail is called once, under mu, with the storage failure
	// (Pipeline logs it).
	onFail func(*OutboxError)
	// Group commit: records are written under mu and made durable by one
	// fsync shared by every writer waiting at that moment.
	writeSeq  uint64
	syncedSeq uint64
	syncing   bool
	pending   map[string]pendingItem // written, not yet fsync'd
	// write and sync are the write and fsync of every record and
	// durability point (a test seam may replace them to inject failures).
	write func(*os.File, []byte) (int, error)
	sync  func(*os.File) error
	// canaryHeld is the batch a canary build acknowledged but has not yet
	// written (see canaryAckBeforeFsync).
	canaryHeld []OutboxItem
	// bytes is the payload bytes of the live and pending items
	// (outbox_bound.go).
	bytes int64
}

type pendingItem struct {
	item *OutboxItem
	seq  uint64
}

// OpenOutbox opens (creating if needed) the outbox in dir and returns the
// items that were retained, in the order they were received.
func OpenOutbox(dir string) (*Outbox, []OutboxItem, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("pipeline: outbox: %w", err)
	}
	o := &Outbox{dir: dir, live: map[string]*OutboxItem{}, seq: map[string]uint64{}, pending: map[string]pendingItem{},
		broken: make(chan struct{}), write: (*os.File).Write, sync: (*os.File).Sync}
	o.cond = sync.NewCond(&o.mu)
	path := filepath.Join(dir, outboxFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("pipeline: outbox: %w", err)
	}
	good, err := o.load(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("pipeline: outbox: %w", err)
	}
	if st.Size() != good {
		// Torn tail: never acknowledged, drop it.
		if err := f.Truncate(good); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("pipeline: outbox: truncate torn tail: %w", err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("pipeline: outbox: fsync: %w", err)
		}
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("pipeline: outbox: %w", err)
	}
	o.f = f
	for _, it := range o.live {
		o.bytes += int64(len(it.Payload))
	}
	return o, o.itemsLocked(), nil
}

func (o *Outbox) load(f *os.File) (int64, error) {
	data, err := io.ReadAll(f)
	if err != nil {
		return 0, fmt.Errorf("pipeline: outbox: read: %w", err)
	}
	var off int64
	for {
		body, n, ok := nextRecord(data[off:])
		if !ok {
			return off, nil
		}
		if err := o.replay(body); err != nil {
			// A CRC-valid record that does not parse is corruption, not a
			// torn write: refuse rather than drop acknowledged facts.
			return 0, fmt.Errorf("pipeline: outbox: record at offset %d: %w", off, err)
		}
		off += int64(n)
	}
}

// nextRecord returns the body of the first complete, checksummed record in
// b and its total length; ok=false at a torn or corrupt tail.
func nextRecord(b []byte) (body []byte, n int, ok bool) {
	if len(b) < 8 {
		return nil, 0, false
	}
	l := binary.LittleEndian.Uint32(b)
	if l == 0 || l > maxOutboxRecord || uint64(len(b)-8) < uint64(l) {
		return nil, 0, false
	}
	body = b[8 : 8+l]
	if crc32.Checksum(body, crcTable) != binary.LittleEndian.Uint32(b[4:]) {
		return nil, 0, false
	}
	return body, 8 + int(l), true
}

func (o *Outbox) replay(body []byte) error {
	r := &guardReader{b: body[1:]}
	switch body[0] {
	case recAdd:
		it := &OutboxItem{}
		it.ID = r.str()
		it.Type = r.str()
		ns := r.uvarint()
		it.Payload = []byte(r.str())
		if r.err != nil {
			return r.err
		}
		it.Received = time.Unix(0, int64(ns)).UTC()
		if _, ok := o.live[it.ID]; !ok {
			o.writeSeq++
			o.live[it.ID] = it
			o.seq[it.ID] = o.writeSeq
		}
	case recDone:
		id := r.str()
		if r.err != nil {
			return r.err
		}
		if _, ok := o.live[id]; ok {
			delete(o.live, id)
			delete(o.seq, id)
			o.done++
		}
	default:
		return fmt.Errorf("unknown record kind %d", body[0])
	}
	return nil
}

func frame(body []byte) []byte {
	rec := make([]byte, 8, 8+len(body))
	binary.LittleEndian.PutUint32(rec, uint32(len(body)))
	binary.LittleEndian.PutUint32(rec[4:], crc32.Checksum(body, crcTable))
	return append(rec, body...)
}

func addBody(it *OutboxItem) []byte {
	b := []byte{recAdd}
	b = appendStr(b, it.ID)
	b = appendStr(b, it.Type)
	b = binary.AppendUvarint(b, uint64(it.Received.UnixNano()))
	return appendStr(b, string(it.Payload))
}

// Add makes a fact durable: it returns nil only after the record is written
// and fsync'd. Adding an ID that is already retained is a no-op. A write or
// fsync error fails the outbox for good (the node must stop and recover
// from disk, W10, see Failed) and is never acknowledged: the error wraps
// ErrOutboxUncertain when the fact's record may have reached the file
// (a restarted node reloads it and commits it), and is only ErrOutboxFailed
// when nothing of the fact was written.
func (o *Outbox) Add(it OutboxItem) error { return o.AddBatch([]OutboxItem{it}) }

// AddBatch makes several facts durable with one write and (at most) one
// fsync, shared with any concurrent writers (group commit). It returns nil
// only when every item is durable.
func (o *Outbox) AddBatch(items []OutboxItem) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.addLocked(items)
}

func (o *Outbox) addLocked(items []OutboxItem) error {
	if o.failed != nil {
		return o.refuseLocked(items)
	}
	if canaryAckBeforeFsync {
		items, o.canaryHeld = o.canaryHeld, items // canary build: ack now, write with the next batch
	}
	// inFile: some item's record was written before this call (by a
	// concurrent writer) and waits for an fsync.
	buf, added, target, inFile := o.stageLocked(items)
	if len(buf) > 0 {
		n, err := o.write(o.f, buf)
		if err != nil {
			o.failLocked("write", o.path(), err)
			if n == 0 {
				// write(2) transferred nothing: none of these records is
				// in the file.
				o.unstageLocked(added)
				if !inFile {
					return o.failed
				}
			}
			return o.uncertainLocked()
		}
	}
	for o.syncedSeq < target {
		if o.failed != nil {
			return o.uncertainLocked()
		}
		if o.syncing {
			o.cond.Wait()
			continue
		}
		o.syncing = true
		upto, f := o.writeSeq, o.f
		o.mu.Unlock()
		err := o.sync(f)
		o.mu.Lock()
		o.syncing = false
		if err != nil {
			o.failLocked("fsync", o.path(), err)
			return o.uncertainLocked()
		}
		o.syncedSeq = upto
		for id, p := range o.pending {
			if p.seq <= upto {
				o.live[id] = p.item
				o.seq[id] = p.seq
				delete(o.pending, id)
			}
		}
		o.cond.Broadcast()
	}
	return nil
}

// stageLocked frames the records of the items not yet retained or being
// written and marks them pending; target is the write sequence every item
// is durable at. inFile: some item was already pending (its record written
// by another call).
func (o *Outbox) stageLocked(items []OutboxItem) (buf []byte, added []string, target uint64, inFile bool) {
	for i := range items {
		it := items[i]
		if _, ok := o.live[it.ID]; ok {
			continue
		}
		if p, ok := o.pending[it.ID]; ok {
			target, inFile = max(target, p.seq), true
			continue
		}
		buf = append(buf, frame(addBody(&it))...)
		o.writeSeq++
		o.pending[it.ID] = pendingItem{item: &it, seq: o.writeSeq}
		o.bytes += int64(len(it.Payload))
		added = append(added, it.ID)
		target = o.writeSeq
	}
	return buf, added, target, inFile
}

// unstageLocked forgets pending items whose records were never written.
func (o *Outbox) unstageLocked(ids []string) {
	for _, id := range ids {
		o.bytes -= int64(len(o.pending[id].item.Payload))
		delete(o.pending, id)
	}
}

// Done records that a fact is committed. It is not fsync'd: losing a done
// record only causes a re-proposal that deduplication absorbs.
func (o *Outbox) Done(id string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.failed != nil {
		return o.failed
	}
	it, ok := o.live[id]
	if !ok {
		return nil
	}
	b := appendStr([]byte{recDone}, id)
	if _, err := o.write(o.f, frame(b)); err != nil {
		o.failLocked("write", o.path(), err)
		return o.failed
	}
	o.bytes -= int64(len(it.Payload))
	delete(o.live, id)
	delete(o.seq, id)
	o.done++
	if o.done > 1024 && o.done > 2*len(o.live) && !o.syncing && len(o.pending) == 0 {
		return o.compactLocked()
	}
	return nil
}

// compactLocked rewrites the file with only live items.
func (o *Outbox) compactLocked() error {
	tmp := filepath.Join(o.dir, outboxFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("pipeline: outbox: compact: %w", err)
	}
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("pipeline: outbox: compact: %w", err)
	}
	for _, it := range o.itemsLocked() {
		if _, err := f.Write(frame(addBody(&it))); err != nil {
			return fail(err)
		}
	}
	if err := o.sync(f); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, filepath.Join(o.dir, outboxFile)); err != nil {
		return fail(err)
	}
	if d, err := os.Open(o.dir); err == nil {
		serr := o.sync(d)
		d.Close()
		if serr != nil {
			o.failLocked("fsync", o.dir, serr)
			f.Close()
			return o.failed
		}
	}
	old := o.f
	o.f = f
	o.done = 0
	return old.Close()
}

// Len is the number of retained facts.
func (o *Outbox) Len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.live)
}

// Items returns the retained facts in the order received.
func (o *Outbox) Items() []OutboxItem {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.itemsLocked()
}

func (o *Outbox) itemsLocked() []OutboxItem {
	out := make([]OutboxItem, 0, len(o.live))
	for _, it := range o.live {
		out = append(out, *it)
	}
	sort.Slice(out, func(i, j int) bool { return o.seq[out[i].ID] < o.seq[out[j].ID] })
	return out
}

// Err reports the failure that stopped the outbox, if any.
func (o *Outbox) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.failed
}

// Close closes the file.
func (o *Outbox) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.f == nil {
		return nil
	}
	err := o.f.Close()
	o.f = nil
	if o.failed == nil {
		o.failed = errors.New("pipeline: outbox closed")
	}
	o.cond.Broadcast()
	if err != nil {
		return fmt.Errorf("pipeline: outbox: %w", err)
	}
	return nil
}
