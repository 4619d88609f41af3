package raftstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/writ-dev/writ/kv"
)

// FuzzApplyCommands applies batches whose shape (how many commands and
// writes, the size of every ID, key, value and veto reason, puts, deletes
// and conditional writes) comes from the fuzzer, to a real state database.
// Apply must never panic or fail, a command must be applied unless it is a
// duplicate, invalid, vetoed or in conflict, and what an applied put wrote
// must read back.
//
// Each command takes 8 bytes of shape: kind, ID length (u16), key length
// (u16), value length (u16, scaled by the last byte for values past
// 64 KiB), so sizes cover the whole arena and key range.
func FuzzApplyCommands(f *testing.F) {
	seed := func(cmds ...[8]byte) []byte {
		var b []byte
		for _, c := range cmds {
			b = append(b, c[:]...)
		}
		return b
	}
	u16 := func(n int) (byte, byte) { return byte(n >> 8), byte(n) }
	shape := func(kind byte, id, key, val int, scale byte) [8]byte {
		var c [8]byte
		c[0] = kind
		c[1], c[2] = u16(id)
		c[3], c[4] = u16(key)
		c[5], c[6] = u16(val)
		c[7] = scale
		return c
	}
	f.Add(seed(shape(0, 3, 1, 3000, 0)))
	f.Add(seed(shape(0, 1, 1, 2583, 0), shape(0, 2, 2, 8192, 0), shape(1, 3, 1, 0, 0)))
	f.Add(seed(shape(0, maxIDBytes, maxKeyBytes, 65535, 15)))
	f.Add(seed(shape(2, maxIDBytes+1, maxKeyBytes+1, 1, 0), shape(3, 0, 0, 1025, 0)))
	s, err := openState(filepath.Join(f.TempDir(), "state.db"), 64)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = s.close() })
	index := uint64(0)
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 8*64 {
			in = in[:8*64]
		}
		var cmds []kv.Command
		total := 0
		for i := 0; i+8 <= len(in); i += 8 {
			c := in[i : i+8]
			idLen := int(binary.BigEndian.Uint16(c[1:3])) % (maxIDBytes + 2)
			keyLen := int(binary.BigEndian.Uint16(c[3:5])) % (maxKeyBytes + 2)
			valLen := int(binary.BigEndian.Uint16(c[5:7])) * (1 + int(c[7]%16))
			if total+idLen+keyLen+valLen > maxApplyBatch {
				break
			}
			total += idLen + keyLen + valLen
			cmd := kv.Command{ID: idOfLen(idLen, i)}
			w := kv.Write{Key: keyOfLen(keyLen, c[0]), Unconditional: true}
			switch c[0] % 4 {
			case 0:
				w.Value = bytes.Repeat([]byte{c[0]}, valLen)
			case 1:
				w.Delete = true
			case 2:
				cmd.Type, cmd.Payload = "veto", bytes.Repeat([]byte("r"), valLen)
			case 3:
				w.Unconditional, w.IfRev = false, uint64(c[7])
				w.Value = bytes.Repeat([]byte{c[0]}, valLen)
			}
			cmd.Effect.Writes = []kv.Write{w}
			cmds = append(cmds, cmd)
		}
		if len(cmds) == 0 {
			return
		}
		index++
		var res []kv.Result
		err := s.apply(1, func(a *applyTx) error {
			var err error
			if res, err = a.applyCommands(index, cmds, sizedVeto{}); err != nil {
				return err
			}
			return a.finish()
		})
		if err != nil {
			t.Fatalf("apply of %d commands (%d bytes): %v", len(cmds), total, err)
		}
		last := map[string]int{} // key -> last command that applied a write to it
		for i, r := range res {
			c := &cmds[i]
			switch {
			case r.Status == kv.StatusApplied:
				last[c.Effect.Writes[0].Key] = i
			case r.Status == kv.StatusDuplicate, r.Status == kv.StatusConflict:
			case r.Status == kv.StatusRejected && (c.Type == "veto" || invalidCommand(c) != ""):
			default:
				t.Fatalf("command %d (id %d bytes, key %d bytes): unexpected %v: %s", i, len(c.ID), len(c.Effect.Writes[0].Key), r.Status, r.Reason)
			}
		}
		for key, i := range last {
			w := cmds[i].Effect.Writes[0]
			rec, ok, err := s.get(key)
			if err != nil || ok == w.Delete || !w.Delete && (!bytes.Equal(rec.Value, w.Value) || rec.Rev != index) {
				t.Fatalf("key of %d bytes after command %d: %v present %v rev %d, %d bytes", len(key), i, err, ok, rec.Rev, len(rec.Value))
			}
		}
		if index%16 == 0 {
			if err := s.flush(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func idOfLen(n, salt int) string {
	if n == 0 {
		return ""
	}
	return strings.Repeat("i", n-1) + fmt.Sprint(salt%10)
}

func keyOfLen(n int, salt byte) string {
	if n == 0 {
		return ""
	}
	return string('a'+rune(salt%3)) + strings.Repeat("k", n-1)
}
