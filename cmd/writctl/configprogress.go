package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/writ-dev/writ/api/writv1"
)

// upgradeProgress shows the phases of `config upgrade` as the node streams
// them: proposed → committed at index N → activated on k/N members →
// confirmed by a majority. On a terminal the current phase is one live
// line (what it waits for and for how long) that is rewritten in place and
// kept, with its duration, once the next phase arrives; otherwise every
// phase is one plain line, printed when it is reached. Each line ends with
// the wire phase in brackets ([STAGED]) for scripts.
type upgradeProgress struct {
	w   io.Writer
	tty bool
	now func() time.Time

	mu      sync.Mutex
	line    string // the current phase's line ("" before the first)
	waiting string // what the current phase waits for (tty only)
	since   time.Time
	printed map[writv1.ConfigProgress_Phase]bool
	stop    chan struct{}
	stopped sync.WaitGroup
	once    sync.Once
}

// upgradeTTY says whether config upgrade draws live lines on w.
var upgradeTTY = isTerminal

func newUpgradeProgress(w io.Writer, tty bool) *upgradeProgress {
	p := &upgradeProgress{w: w, tty: tty, now: time.Now, printed: map[writv1.ConfigProgress_Phase]bool{}, stop: make(chan struct{})}
	p.since = p.now()
	if tty {
		p.stopped.Add(1)
		go p.tick()
	}
	return p
}

// tick redraws the live line's elapsed time.
func (p *upgradeProgress) tick() {
	defer p.stopped.Done()
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			p.drawLocked()
			p.mu.Unlock()
		}
	}
}

func (p *upgradeProgress) drawLocked() {
	if p.line == "" {
		return
	}
	s := p.line
	if p.waiting != "" {
		s += fmt.Sprintf(" — %s %.1fs", p.waiting, p.now().Sub(p.since).Seconds())
	}
	fmt.Fprint(p.w, "\r\033[K"+s)
}

// finishLocked keeps the current live line with how long its phase took.
func (p *upgradeProgress) finishLocked() {
	if !p.tty || p.line == "" {
		return
	}
	fmt.Fprintf(p.w, "\r\033[K%s (%.1fs)\n", p.line, p.now().Sub(p.since).Seconds())
	p.line = ""
}

// phase shows one progress message of the stream.
func (p *upgradeProgress) phase(m *writv1.ConfigProgress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	line, waiting := phaseLine(m)
	update := m.Phase == writv1.ConfigProgress_ACTIVATED && m.Members > 0 && p.printed[m.Phase]
	switch {
	case update && !p.tty:
		// one plain line per phase: the member count shows in the
		// final line
		return
	case update:
		// the same phase, more members: rewrite the live line
		p.line, p.waiting = line, waiting
		p.drawLocked()
		return
	}
	p.finishLocked()
	p.printed[m.Phase] = true
	p.since = p.now()
	if !p.tty || waiting == "" {
		fmt.Fprintln(p.w, line)
	} else {
		p.line, p.waiting = line, waiting
		p.drawLocked()
	}
	for _, r := range m.RestartRequired {
		fmt.Fprintln(p.w, "  restart required: "+r)
	}
}

// close ends the live line; call it before anything else is printed
// (nil-safe, idempotent).
func (p *upgradeProgress) close() {
	if p == nil {
		return
	}
	p.once.Do(func() {
		if p.tty {
			close(p.stop)
			p.stopped.Wait()
		}
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finishLocked()
}

// phaseLine is the text of one phase and, while the upgrade goes on after
// it, what the next step waits for.
func phaseLine(m *writv1.ConfigProgress) (line, waiting string) {
	tag := ""
	if m.Tag != "" {
		tag = fmt.Sprintf(" tag %q", m.Tag)
	}
	voters := ""
	if m.Of > 0 {
		voters = fmt.Sprintf(" (on %d of %d voters)", m.CommittedBy, m.Of)
	}
	members := ""
	if m.Members > 0 {
		members = fmt.Sprintf(": active on %d/%d members", m.ActiveOn, m.Members)
	}
	switch m.Phase {
	case writv1.ConfigProgress_VALIDATED:
		line, waiting = "proposed: "+m.Message, "waiting for the stage entry to commit"
	case writv1.ConfigProgress_STAGED:
		line, waiting = fmt.Sprintf("committed at index %d%s", m.Index, voters), "activating"
	case writv1.ConfigProgress_ACTIVATED:
		if strings.HasPrefix(m.Message, "activation committed") || m.Members > 0 {
			// writ's own settings: every member reloads them next
			line, waiting = fmt.Sprintf("activated at index %d%s%s", m.Index, tag, members), "waiting for the members to reload"
			if members == "" {
				line += voters
			}
		} else {
			line = fmt.Sprintf("confirmed by a majority%s at index %d%s: %s", tag, m.Index, voters, m.Message)
		}
	case writv1.ConfigProgress_RELOADED:
		line = fmt.Sprintf("confirmed by a majority%s at index %d%s%s", tag, m.Index, voters, members)
	case writv1.ConfigProgress_FAILED:
		line = "failed"
		if m.Outcome != writv1.Outcome_OUTCOME_UNSPECIFIED {
			line += " (" + m.Outcome.String() + ")"
		}
		if m.Message != "" {
			line += ": " + m.Message
		}
	default:
		line = m.Phase.String() + ": " + m.Message
	}
	return line + " [" + m.Phase.String() + "]", waiting
}
