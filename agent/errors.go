package agent

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"syscall"
	"time"

	"conch"
	"conch/internal/backoff"
)

// classify returns the kind of a model failure. Providers report
// *conch.ModelError; anything else is classified by what it wraps.
func classify(ctx context.Context, err error) conch.ErrorKind {
	if ctx.Err() != nil {
		// The turn itself was cancelled (/stop, shutdown): never retried.
		return conch.KindInternal
	}
	var me *conch.ModelError
	if errors.As(err, &me) {
		return me.Kind
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.EOF),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.EPIPE),
		errors.As(err, &ne) && ne.Timeout():
		return conch.KindTransient
	}
	return conch.KindInternal
}

// retryAfter returns the server's requested delay, 0 when none.
func retryAfter(err error) time.Duration {
	var me *conch.ModelError
	if errors.As(err, &me) {
		return me.RetryAfter
	}
	return 0
}

// RetryPolicy is exponential backoff with full jitter.
type RetryPolicy struct {
	// Max is the number of retries after the first attempt.
	Max  int
	Base time.Duration
	// Cap bounds one delay. A Retry-After longer than Cap ends the turn
	// instead of waiting.
	Cap time.Duration
}

// delay returns the wait before retry number n (1-based): the server's
// Retry-After when given, else the shared backoff (Base·2^(n-1), capped,
// jitter in [d/2, d]).
func (p RetryPolicy) delay(n int, serverWants time.Duration, rnd func() float64) time.Duration {
	if serverWants > 0 {
		return serverWants
	}
	return backoff.Policy{Base: p.Base, Cap: p.Cap, Rand: rnd}.Delay(n)
}

func defaultRand() float64 { return rand.Float64() }
