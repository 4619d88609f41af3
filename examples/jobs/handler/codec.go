package handler

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/writ-dev/writ/plugins/sdk"
)

// The handler owns the JSON format of its documents, so it writes them with
// append and strconv instead of encoding/json's reflection, producing the
// very bytes json.Marshal produces (a test checks that on random
// documents). Reading takes the fast path only for the exact form the
// handler writes (no whitespace, known keys once each, plain ASCII strings,
// integer literals); anything else is decoded by encoding/json, so a
// document decodes to the same value either way.

// appendString appends s as a JSON string, exactly as json.Marshal quotes
// it (HTML characters and non-ASCII are left to encoding/json).
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func appendStrings(b []byte, list []string) []byte {
	if list == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// field appends `,"name":` (without the comma for the first field).
func field(b []byte, name string) []byte {
	if len(b) > 0 && b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, name...)
	return append(b, '"', ':')
}

func (j *Job) appendJSON(b []byte) []byte {
	b = append(b, '{')
	b = appendString(field(b, "job_id"), j.JobID)
	b = appendString(field(b, "queue"), j.Queue)
	b = strconv.AppendInt(field(b, "priority"), j.Priority, 10)
	b = appendString(field(b, "command"), j.Command)
	if j.CPUMillis != 0 {
		b = strconv.AppendInt(field(b, "cpu_millis"), j.CPUMillis, 10)
	}
	if j.MemBytes != 0 {
		b = strconv.AppendInt(field(b, "mem_bytes"), j.MemBytes, 10)
	}
	b = appendString(field(b, "state"), j.State)
	if j.Worker != "" {
		b = appendString(field(b, "worker"), j.Worker)
	}
	if j.Seq != 0 {
		b = strconv.AppendUint(field(b, "seq"), j.Seq, 10)
	}
	if j.ExitCode != nil {
		b = strconv.AppendInt(field(b, "exit_code"), *j.ExitCode, 10)
	}
	if j.Message != "" {
		b = appendString(field(b, "message"), j.Message)
	}
	if j.Reason != "" {
		b = appendString(field(b, "reason"), j.Reason)
	}
	if j.PendingReason != "" {
		b = appendString(field(b, "pending_reason"), j.PendingReason)
	}
	if j.ReasonSeq != 0 {
		b = strconv.AppendUint(field(b, "reason_seq"), j.ReasonSeq, 10)
	}
	if j.Requeues != 0 {
		b = strconv.AppendInt(field(b, "requeues"), int64(j.Requeues), 10)
	}
	return append(b, '}')
}

func (q *Queue) appendJSON(b []byte) []byte {
	b = append(b, '{')
	b = appendString(field(b, "name"), q.Name)
	b = appendString(field(b, "state"), q.State)
	return append(b, '}')
}

func (w *Worker) appendJSON(b []byte) []byte {
	b = append(b, '{')
	b = appendString(field(b, "worker_id"), w.WorkerID)
	b = strconv.AppendInt(field(b, "capacity"), w.Capacity, 10)
	if len(w.Labels) != 0 {
		b = appendStrings(field(b, "labels"), w.Labels)
	}
	b = appendString(field(b, "state"), w.State)
	b = appendStrings(field(b, "running"), w.Running)
	if w.Usage != nil {
		b = append(field(b, "usage"), '{')
		b = strconv.AppendInt(field(b, "cpu_millis"), w.Usage.CPUMillis, 10)
		b = strconv.AppendInt(field(b, "mem_bytes"), w.Usage.MemBytes, 10)
		b = strconv.AppendUint(field(b, "seq"), w.Usage.Seq, 10)
		b = append(b, '}')
	}
	if w.Deaths != 0 {
		b = strconv.AppendInt(field(b, "deaths"), int64(w.Deaths), 10)
	}
	if w.DetectedBy != "" {
		b = appendString(field(b, "detected_by"), w.DetectedBy)
	}
	return append(b, '}')
}

func (r *Result) appendJSON(b []byte) []byte {
	b = append(b, '{')
	if r.JobID != "" {
		b = appendString(field(b, "job_id"), r.JobID)
	}
	if r.Queue != "" {
		b = appendString(field(b, "queue"), r.Queue)
	}
	if r.WorkerID != "" {
		b = appendString(field(b, "worker_id"), r.WorkerID)
	}
	if r.State != "" {
		b = appendString(field(b, "state"), r.State)
	}
	if r.Capacity != 0 {
		b = strconv.AppendInt(field(b, "capacity"), r.Capacity, 10)
	}
	if r.Running != 0 {
		b = strconv.AppendInt(field(b, "running"), int64(r.Running), 10)
	}
	return append(b, '}')
}

// docSize is the initial capacity of an encoded document.
const docSize = 128

func putJob(c *sdk.Call, key string, j *Job) {
	c.Put(key, j.appendJSON(make([]byte, 0, docSize)))
}

func putWorker(c *sdk.Call, key string, w *Worker) {
	c.Put(key, w.appendJSON(make([]byte, 0, docSize)))
}

func putQueue(c *sdk.Call, key string, q *Queue) {
	c.Put(key, q.appendJSON(make([]byte, 0, 64)))
}

// setResult sets the result document, encoded by Result.appendJSON (the
// same document encoding/json writes, which the codec tests check) and
// handed over as bytes: no reflection.
func setResult(c *sdk.Call, r Result) error {
	return c.SetResultJSON(r.appendJSON(make([]byte, 0, 64)))
}

// decodeDoc decodes the document b at key into v (a zero value), as
// sdk.Call.GetJSON does: a malformed document is an internal error. fast is
// the strict decoder of the form the handler writes; when it reports false
// (v possibly half-filled), v is reset and encoding/json decodes b.
func decodeDoc[T any](key string, b []byte, v *T, fast func(*T, []byte) bool) error {
	if fast(v, b) {
		return nil
	}
	var zero T
	*v = zero
	if err := json.Unmarshal(b, v); err != nil {
		return sdk.Internal("key %q holds a malformed document: %v", key, err)
	}
	return nil
}

// scanner reads the strict form: `{"key":value,...}` without whitespace.
type scanner struct {
	b  []byte
	i  int
	ok bool
}

// next returns the next key: "" at the end of the object (ok stays true)
// or on a mismatch (ok turns false).
func (s *scanner) next() string {
	if !s.ok || s.i >= len(s.b) {
		s.ok = false
		return ""
	}
	switch c := s.b[s.i]; {
	case s.i == 0 && c == '{':
		if len(s.b) == 2 && s.b[1] == '}' {
			s.i = 2
			return ""
		}
	case s.i > 0 && c == ',':
	case s.i > 0 && c == '}':
		s.i++
		s.ok = s.i == len(s.b)
		return ""
	default:
		s.ok = false
		return ""
	}
	s.i++
	k := s.str()
	if !s.ok || s.i >= len(s.b) || s.b[s.i] != ':' || k == "" {
		s.ok = false
		return ""
	}
	s.i++
	return k
}

// states are the state names a document holds, kept as constants so that
// reading one does not allocate.
var states = [...]string{Pending, Held, Dispatched, Running, Completed, Failed, Cancelled, Active, Paused, Draining, Ready, Dead, Removed}

// state reads a string, returning the constant for a known state name.
func (s *scanner) state() string {
	if s.i < len(s.b) && s.b[s.i] == '"' {
		for _, st := range states {
			if e := s.i + 1 + len(st); e < len(s.b) && s.b[e] == '"' && string(s.b[s.i+1:e]) == st {
				s.i = e + 1
				return st
			}
		}
	}
	return s.str()
}

// str reads a string without escapes, control characters or non-ASCII.
func (s *scanner) str() string {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		s.ok = false
		return ""
	}
	for j := s.i + 1; j < len(s.b); j++ {
		c := s.b[j]
		if c == '"' {
			v := string(s.b[s.i+1 : j])
			s.i = j + 1
			return v
		}
		if c < 0x20 || c == '\\' || c >= utf8.RuneSelf {
			break
		}
	}
	s.ok = false
	return ""
}

func (s *scanner) number() []byte {
	j := s.i
	if j < len(s.b) && s.b[j] == '-' {
		j++
	}
	d := j
	for j < len(s.b) && '0' <= s.b[j] && s.b[j] <= '9' {
		j++
	}
	// Only canonical integers: no leading zero (json rejects it), no
	// fraction or exponent (json rejects those for integer fields).
	if j == d || (s.b[d] == '0' && j-d > 1) || (j < len(s.b) && s.b[j] != ',' && s.b[j] != '}') {
		s.ok = false
		return nil
	}
	n := s.b[s.i:j]
	s.i = j
	return n
}

func (s *scanner) int64() int64 {
	n := s.number()
	if !s.ok {
		return 0
	}
	v, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		s.ok = false
	}
	return v
}

func (s *scanner) int() int {
	n := s.number()
	if !s.ok {
		return 0
	}
	v, err := strconv.ParseInt(string(n), 10, strconv.IntSize)
	if err != nil {
		s.ok = false
	}
	return int(v)
}

func (s *scanner) uint64() uint64 {
	n := s.number()
	if !s.ok || n[0] == '-' {
		s.ok = false
		return 0
	}
	v, err := strconv.ParseUint(string(n), 10, 64)
	if err != nil {
		s.ok = false
	}
	return v
}

// strings reads a list of strings; null is left to encoding/json.
func (s *scanner) strings() []string {
	if s.i >= len(s.b) || s.b[s.i] != '[' {
		s.ok = false
		return nil
	}
	s.i++
	out := []string{}
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return out
	}
	for s.ok {
		out = append(out, s.str())
		if s.i >= len(s.b) {
			break
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			continue
		case ']':
			s.i++
			return out
		}
		break
	}
	s.ok = false
	return nil
}

// once marks bit as seen, failing on a repeated key.
func (s *scanner) once(seen *uint32, bit uint32) {
	if *seen&bit != 0 {
		s.ok = false
	}
	*seen |= bit
}

func fastJob(j *Job, b []byte) bool {
	s := scanner{b: b, ok: true}
	var seen uint32
	for {
		k := s.next()
		if !s.ok || k == "" {
			return s.ok
		}
		switch k {
		case "job_id":
			s.once(&seen, 1<<0)
			j.JobID = s.str()
		case "queue":
			s.once(&seen, 1<<1)
			j.Queue = s.str()
		case "priority":
			s.once(&seen, 1<<2)
			j.Priority = s.int64()
		case "command":
			s.once(&seen, 1<<3)
			j.Command = s.str()
		case "cpu_millis":
			s.once(&seen, 1<<4)
			j.CPUMillis = s.int64()
		case "mem_bytes":
			s.once(&seen, 1<<5)
			j.MemBytes = s.int64()
		case "state":
			s.once(&seen, 1<<6)
			j.State = s.state()
		case "worker":
			s.once(&seen, 1<<7)
			j.Worker = s.str()
		case "seq":
			s.once(&seen, 1<<8)
			j.Seq = s.uint64()
		case "exit_code":
			s.once(&seen, 1<<9)
			v := s.int64()
			j.ExitCode = &v
		case "message":
			s.once(&seen, 1<<10)
			j.Message = s.str()
		case "reason":
			s.once(&seen, 1<<11)
			j.Reason = s.str()
		case "pending_reason":
			s.once(&seen, 1<<12)
			j.PendingReason = s.str()
		case "reason_seq":
			s.once(&seen, 1<<13)
			j.ReasonSeq = s.uint64()
		case "requeues":
			s.once(&seen, 1<<14)
			j.Requeues = s.int()
		default:
			return false
		}
	}
}

func fastQueue(q *Queue, b []byte) bool {
	s := scanner{b: b, ok: true}
	var seen uint32
	for {
		k := s.next()
		if !s.ok || k == "" {
			return s.ok
		}
		switch k {
		case "name":
			s.once(&seen, 1<<0)
			q.Name = s.str()
		case "state":
			s.once(&seen, 1<<1)
			q.State = s.state()
		default:
			return false
		}
	}
}

func fastWorker(w *Worker, b []byte) bool {
	s := scanner{b: b, ok: true}
	var seen uint32
	for {
		k := s.next()
		if !s.ok || k == "" {
			return s.ok
		}
		switch k {
		case "worker_id":
			s.once(&seen, 1<<0)
			w.WorkerID = s.str()
		case "capacity":
			s.once(&seen, 1<<1)
			w.Capacity = s.int64()
		case "labels":
			s.once(&seen, 1<<2)
			w.Labels = s.strings()
		case "state":
			s.once(&seen, 1<<3)
			w.State = s.state()
		case "running":
			s.once(&seen, 1<<4)
			w.Running = s.strings()
		case "usage":
			s.once(&seen, 1<<5)
			// The object runs to the first '}' (it holds only numbers).
			end := s.i
			for end < len(b) && b[end] != '}' {
				end++
			}
			if end >= len(b) {
				return false
			}
			var u Usage
			if !fastUsage(&u, b[s.i:end+1]) {
				return false
			}
			w.Usage = &u
			s.i = end + 1
		case "deaths":
			s.once(&seen, 1<<6)
			w.Deaths = s.int()
		case "detected_by":
			s.once(&seen, 1<<7)
			w.DetectedBy = s.str()
		default:
			return false
		}
	}
}

func fastUsage(u *Usage, b []byte) bool {
	s := scanner{b: b, ok: true}
	var seen uint32
	for {
		k := s.next()
		if !s.ok || k == "" {
			return s.ok
		}
		switch k {
		case "cpu_millis":
			s.once(&seen, 1<<0)
			u.CPUMillis = s.int64()
		case "mem_bytes":
			s.once(&seen, 1<<1)
			u.MemBytes = s.int64()
		case "seq":
			s.once(&seen, 1<<2)
			u.Seq = s.uint64()
		default:
			return false
		}
	}
}
