package client

import (
	"context"
	"time"

	"github.com/writ-dev/writ/api/writv1"
)

// tries is what a call's attempts across endpoints came to.
type tries struct {
	addr     string // the endpoint of the last attempt
	attempts int
	// maybe: some attempt failed after its request may have left the
	// client (no answer, connection lost, deadline): it may have been
	// applied.
	maybe bool
	err   error // the last attempt's error; nil: the last attempt succeeded
}

// retry runs fn on one endpoint after another until an endpoint answers
// with something other than "unavailable": a transport failure or a
// server's UNAVAILABLE (definitely not appended) moves to the next endpoint
// (the leader first when lead), for as long as ctx and the budget allow and
// at most MaxAttempts times when the request may have left. Every attempt
// has its own deadline perAttempt; going round endpoints that answer
// "unavailable" stops after perAttempt, and round endpoints that take no
// request at all after maxDeadRounds rounds. fn must be safe to repeat: requests carry
// their ID, so a repeat is deduplicated.
func (c *Client) retry(ctx context.Context, lead bool, perAttempt time.Duration, fn func(context.Context, writv1.WritClient) error) tries {
	if lead {
		c.learnLeader(ctx)
	}
	var t tries
	end := time.Now().Add(perAttempt)
	sentAttempts, round, deadRounds := 0, 0, 0
	answered := false // some endpoint answered, or took the request, this round
	tried := map[int]bool{}
	for {
		i, conn, addr, err := c.pick(lead, tried)
		if err != nil {
			t.err = err
			return t
		}
		if i < 0 {
			// every endpoint was tried this round: wait a little and go
			// round again (a leader is being elected, a node restarts)
			tried = map[int]bool{}
			if !answered {
				// no endpoint even accepts a connection: say so soon
				// rather than spin for the whole budget
				if deadRounds++; deadRounds >= maxDeadRounds {
					return t
				}
			}
			answered = false
			if !pause(ctx, end, min(50*time.Millisecond<<min(round, 4), 500*time.Millisecond)) {
				return t
			}
			round++
			continue
		}
		tried[i] = true
		t.attempts++
		t.addr = addr
		actx, cancel := context.WithTimeout(ctx, perAttempt)
		actx, sent := trackSent(actx)
		err = fn(actx, c.writClient(i, conn))
		cancel()
		t.err = err
		if err == nil {
			c.up(i)
			return t
		}
		answered = answered || sent.Load()
		if d, ok := detail(err); ok {
			c.up(i)
			if statusOf(d.Outcome) != Unavailable {
				return t
			}
			if d.LeaderApi != "" {
				c.setLeader(d.LeaderApi)
			}
		} else if !transportFailure(err) {
			c.up(i)
			return t
		} else {
			c.down(i)
			if sent.Load() {
				// a fresh budget for the retry of a request that may
				// have arrived
				t.maybe = true
				sentAttempts++
				end = time.Now().Add(perAttempt)
			}
		}
		if ctx.Err() != nil || time.Now().After(end) || sentAttempts >= c.cfg.MaxAttempts {
			return t
		}
	}
}

// maxDeadRounds is how many times retry goes round endpoints none of which
// takes the request before it gives up.
const maxDeadRounds = 3

// pause waits d, or less when ctx or end come first; false: no time left.
func pause(ctx context.Context, end time.Time, d time.Duration) bool {
	left := time.Until(end)
	if left <= 0 {
		return false
	}
	tm := time.NewTimer(min(d, left))
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}
