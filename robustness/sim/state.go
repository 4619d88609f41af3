package sim

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/writ-dev/writ/kv"
)

// state is a node's applied state: keys with revisions and the outcome
// (dedup) table, decided per command as raftstore's apply decides (W7):
// duplicate or fenced ID, invalid command, checker veto, revision
// preconditions, then every write at the entry's index. It lives in memory
// and is rebuilt from the durable snapshot and log on restart.
type state struct {
	Applied  uint64
	Keys     map[string]kv.Record
	Outcomes map[string]kv.Result
}

func newState() *state {
	return &state{Keys: map[string]kv.Record{}, Outcomes: map[string]kv.Result{}}
}

type reader struct{ s *state }

func (r reader) Get(key string) (kv.Record, bool) {
	rec, ok := r.s.Keys[key]
	return rec, ok
}

// apply decides and applies one entry's commands at index.
func (s *state) apply(index uint64, cmds []kv.Command, checker kv.Checker) []kv.Result {
	res := make([]kv.Result, len(cmds))
	for i := range cmds {
		c := &cmds[i]
		r := &res[i]
		r.Index = index
		if c.ID != "" {
			if prev, ok := s.Outcomes[c.ID]; ok {
				switch prev.Status {
				case kv.StatusApplied:
					*r = kv.Result{Index: index, Status: kv.StatusDuplicate, FirstIndex: prev.Index, Digest: prev.Digest, Verdict: prev.Verdict}
					continue
				case kv.StatusFenced:
					*r = kv.Result{Index: index, Status: kv.StatusFenced, FirstIndex: prev.FirstIndex}
					continue
				}
			}
		}
		record := func() {
			if c.ID != "" {
				rr := *r
				rr.Digest = kv.PayloadDigest(c.Payload)
				rr.Verdict = c.Verdict
				if rr.Status == kv.StatusFenced {
					rr.FirstIndex = index
				}
				s.Outcomes[c.ID] = rr
				r.Digest, r.Verdict = rr.Digest, rr.Verdict
				r.FirstIndex = rr.FirstIndex
			}
		}
		if c.Type == kv.TypeFence {
			r.Status = kv.StatusFenced
			record()
			continue
		}
		if bad := invalid(c); bad != "" {
			r.Status, r.Reason = kv.StatusRejected, bad
			record()
			continue
		}
		if checker != nil {
			if err := checker.Check(c, reader{s}); err != nil {
				r.Status, r.Reason = kv.StatusRejected, err.Error()
				if errors.Is(err, kv.ErrMoved) { // as raftstore: a conflict
					r.Status = kv.StatusConflict
				}
				record()
				continue
			}
		}
		conflict := ""
		for _, w := range c.Effect.Writes {
			if w.Unconditional {
				continue
			}
			if cur := s.Keys[w.Key].Rev; cur != w.IfRev {
				conflict = fmt.Sprintf("key %q is at revision %d, not %d", w.Key, cur, w.IfRev)
				break
			}
		}
		if conflict != "" {
			r.Status, r.Reason = kv.StatusConflict, conflict
			record()
			continue
		}
		for _, w := range c.Effect.Writes {
			if w.Delete {
				delete(s.Keys, w.Key)
				continue
			}
			s.Keys[w.Key] = kv.Record{Key: w.Key, Value: slices.Clone(w.Value), Rev: index}
		}
		r.Status = kv.StatusApplied
		record()
	}
	s.Applied = index
	return res
}

func invalid(c *kv.Command) string {
	for i, w := range c.Effect.Writes {
		if w.Key == "" {
			return fmt.Sprintf("write %d: empty key", i)
		}
	}
	return ""
}

// encode is the snapshot data: the state as JSON (maps marshal in key
// order, so equal states encode equally).
func (s *state) encode() []byte {
	b, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("sim: encode state: %v", err))
	}
	return b
}

func decodeState(b []byte) (*state, error) {
	s := newState()
	if len(b) == 0 {
		return s, nil
	}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("sim: decode snapshot state: %w", err)
	}
	if s.Keys == nil {
		s.Keys = map[string]kv.Record{}
	}
	if s.Outcomes == nil {
		s.Outcomes = map[string]kv.Result{}
	}
	return s, nil
}

// hash is the state hash compared across nodes after heal.
func (s *state) hash() string {
	sum := sha256.Sum256(s.encode())
	return fmt.Sprintf("%x", sum[:8])
}
