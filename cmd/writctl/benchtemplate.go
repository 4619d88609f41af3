package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
)

// benchHole is one placeholder of a payload template.
type benchHole int

const (
	holeSeq    benchHole = iota // the operation's number, 0..ops-1
	holeRand                    // 16 random hex digits
	holeClient                  // the client's number, 0..clients-1
	holeRun                     // the run name
)

var benchHoles = map[string]benchHole{"seq": holeSeq, "rand": holeRand, "client": holeClient, "run": holeRun}

// benchTemplate is a payload with {{seq}}, {{rand}}, {{client}} and {{run}}
// placeholders, split once so that rendering one operation's payload is
// appends only. Every substituted value is made of letters, digits, '.',
// '_' or '-' (the run name is JSON-escaped), so a placeholder inside a JSON
// string never breaks it.
type benchTemplate struct {
	lits  []string // len(holes)+1 literal pieces
	holes []benchHole
	run   string
}

// has reports whether the template uses placeholder h.
func (t *benchTemplate) has(h benchHole) bool {
	for _, x := range t.holes {
		if x == h {
			return true
		}
	}
	return false
}

// parseBenchTemplate splits src at its placeholders and checks that it is
// JSON after substitution, whatever the values.
func parseBenchTemplate(src []byte, run string) (*benchTemplate, error) {
	esc, _ := json.Marshal(run)
	t := &benchTemplate{run: string(esc[1 : len(esc)-1])}
	s := string(src)
	for {
		i := strings.Index(s, "{{")
		if i < 0 {
			break
		}
		j := strings.Index(s[i:], "}}")
		if j < 0 {
			return nil, fmt.Errorf("payload template: %q opens a placeholder that is never closed: write {{seq}}, {{rand}}, {{client}} or {{run}}", s[i:min(len(s), i+12)])
		}
		name := strings.TrimSpace(s[i+2 : i+j])
		h, ok := benchHoles[name]
		if !ok {
			return nil, fmt.Errorf("payload template: unknown placeholder {{%s}}: use {{seq}}, {{rand}}, {{client}} or {{run}}", name)
		}
		t.lits = append(t.lits, s[:i])
		t.holes = append(t.holes, h)
		s = s[i+j+2:]
	}
	t.lits = append(t.lits, s)
	// A rand value of letters only and one of digits only: a placeholder
	// outside quotes parses for neither or only one of them.
	for _, r := range []string{"abcdefabcdefabcd", "1234567890123456"} {
		p := t.appendWith(nil, 7, 3, r)
		if !json.Valid(p) {
			return nil, fmt.Errorf("payload template is not valid JSON after substitution (e.g. %s): quote string placeholders, as in {\"id\":\"x-{{seq}}\"}", shorten(p, 120))
		}
	}
	return t, nil
}

// render returns the payload of operation seq sent by client.
func (t *benchTemplate) render(seq, client int, rnd *rand.Rand) []byte {
	var r string
	if t.has(holeRand) {
		var b [8]byte
		for i := range b {
			b[i] = byte(rnd.Uint32())
		}
		r = hex.EncodeToString(b[:])
	}
	return t.appendWith(nil, seq, client, r)
}

func (t *benchTemplate) appendWith(dst []byte, seq, client int, r string) []byte {
	for i, h := range t.holes {
		dst = append(dst, t.lits[i]...)
		switch h {
		case holeSeq:
			dst = strconv.AppendInt(dst, int64(seq), 10)
		case holeRand:
			dst = append(dst, r...)
		case holeClient:
			dst = strconv.AppendInt(dst, int64(client), 10)
		case holeRun:
			dst = append(dst, t.run...)
		}
	}
	return append(dst, t.lits[len(t.lits)-1]...)
}

// readBenchTemplate reads --payload: inline JSON or @file.
func readBenchTemplate(arg string) ([]byte, error) {
	if !strings.HasPrefix(arg, "@") {
		return []byte(arg), nil
	}
	b, err := os.ReadFile(arg[1:])
	if err != nil {
		return nil, fmt.Errorf("--payload %s: %w: name a readable JSON template file", arg, err)
	}
	return b, nil
}

func shorten(b []byte, n int) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}
