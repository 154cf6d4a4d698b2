// Package backoff is conch's one retry helper: exponential backoff with full
// jitter, a cap, an optional attempt limit, a server's Retry-After honoured,
// and an injectable wait so tests run on a fake clock (testing/synctest).
package backoff

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// Policy says how to wait between attempts.
type Policy struct {
	// Base is the first delay (default 500ms); each retry doubles it.
	Base time.Duration
	// Cap bounds one delay (default 1 minute).
	Cap time.Duration
	// Max is the number of retries after the first attempt; 0 retries forever.
	Max int
	// NoJitter waits exactly Base·2^n; by default a delay is drawn uniformly
	// from [d/2, d] so that many clients do not retry in step.
	NoJitter bool
	// Wait sleeps for d or until ctx is done (default: a timer). Tests use
	// testing/synctest, where the default timer runs on the bubble's clock.
	Wait func(ctx context.Context, d time.Duration) error
	// Rand returns a number in [0, 1) (default math/rand/v2).
	Rand func() float64
}

// Delay is the wait before retry number attempt (1 for the first retry).
func (p Policy) Delay(attempt int) time.Duration {
	base, capd := p.Base, p.Cap
	if base <= 0 {
		base = 500 * time.Millisecond
	}
	if capd <= 0 {
		capd = time.Minute
	}
	d := base
	for i := 1; i < attempt && d < capd; i++ {
		d *= 2
	}
	d = min(d, capd)
	if p.NoJitter {
		return d
	}
	rnd := p.Rand
	if rnd == nil {
		rnd = rand.Float64
	}
	return d/2 + time.Duration(rnd()*float64(d/2))
}

// Sleep waits for d or until ctx is done, with the policy's Wait.
func (p Policy) Sleep(ctx context.Context, d time.Duration) error {
	if p.Wait != nil {
		return p.Wait(ctx, d)
	}
	return Sleep(ctx, d)
}

// Sleep waits for d or until ctx is done.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// permanent marks an error that must not be retried.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent wraps err so that Retry returns it at once.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

// After wraps err with the wait a server asked for (Retry-After); Retry
// waits at least that long before the next attempt.
func After(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return retryAfter{err, d}
}

type retryAfter struct {
	err error
	d   time.Duration
}

func (r retryAfter) Error() string { return r.err.Error() }
func (r retryAfter) Unwrap() error { return r.err }

// Retry calls fn until it returns nil, a Permanent error, the attempts are
// used up, or ctx is done. fn gets the attempt number, 1 first. onRetry, if
// set, is told of each failure that will be retried and the wait before it.
// The error returned is fn's last (unwrapped from Permanent).
func (p Policy) Retry(ctx context.Context, fn func(ctx context.Context, attempt int) error, onRetry func(attempt int, err error, wait time.Duration)) error {
	for attempt := 1; ; attempt++ {
		err := fn(ctx, attempt)
		if err == nil {
			return nil
		}
		var perm permanent
		if errors.As(err, &perm) {
			return perm.err
		}
		if ctx.Err() != nil {
			return err
		}
		if p.Max > 0 && attempt > p.Max {
			return err
		}
		wait := p.Delay(attempt)
		var ra retryAfter
		if errors.As(err, &ra) && ra.d > wait {
			wait = ra.d
		}
		if onRetry != nil {
			onRetry(attempt, err, wait)
		}
		if serr := p.Sleep(ctx, wait); serr != nil {
			return err
		}
	}
}
