// Package backoff computes retry delays: exponential steps between a
// minimum and a maximum, each delay shortened by a random fraction (jitter)
// so that many retriers that failed together do not retry together.
//
// It imports only the standard library, so the pipeline (stdlib, kv and
// schema/ir otherwise) can use it.
package backoff

import (
	"math/rand/v2"
	"time"
)

// DefaultJitter is the fraction by which a delay may be shortened: a step of
// d waits between (1-DefaultJitter)·d and d.
const DefaultJitter = 0.2

// Policy describes one retry loop's delays. The zero Jitter means
// DefaultJitter; a negative Jitter means none.
type Policy struct {
	Min, Max time.Duration
	Jitter   float64
	// Rand returns a number in [0, 1); nil means math/rand/v2.Float64.
	// Deterministic tests pass a fixed source.
	Rand func() float64
}

// Step returns the un-jittered step after cur: Min when cur is zero (the
// first failure, or after a reset), otherwise cur doubled, never above Max.
func (p Policy) Step(cur time.Duration) time.Duration {
	if cur <= 0 {
		return min(p.Min, p.Max)
	}
	if cur > p.Max/2 {
		return p.Max
	}
	return 2 * cur
}

// Delay returns step shortened by a random fraction of at most Jitter: a
// value in ((1-Jitter)·step, step]. It is never longer than step, so Max
// stays an upper bound.
func (p Policy) Delay(step time.Duration) time.Duration {
	j := p.Jitter
	if j == 0 {
		j = DefaultJitter
	}
	if j < 0 || step <= 0 {
		return step
	}
	j = min(j, 1)
	r := rand.Float64
	if p.Rand != nil {
		r = p.Rand
	}
	return step - time.Duration(j*r()*float64(step))
}

// Next advances *cur to the next step and returns its jittered delay. Reset
// a retrier by setting *cur to zero.
func (p Policy) Next(cur *time.Duration) time.Duration {
	*cur = p.Step(*cur)
	return p.Delay(*cur)
}
