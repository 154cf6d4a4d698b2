package backoff

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

func TestDelayDoublesUpToCap(t *testing.T) {
	p := Policy{Base: 100 * time.Millisecond, Cap: time.Second, NoJitter: true}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		if got := p.Delay(i + 1); got != w*time.Millisecond {
			t.Errorf("Delay(%d) = %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
}

func TestDelayJitterStaysInHalfToFull(t *testing.T) {
	for _, r := range []float64{0, 0.5, 0.999} {
		p := Policy{Base: time.Second, Cap: time.Minute, Rand: func() float64 { return r }}
		got := p.Delay(3) // 4s nominal
		if got < 2*time.Second || got > 4*time.Second {
			t.Errorf("rand %v: Delay(3) = %v, want within [2s, 4s]", r, got)
		}
	}
}

func TestRetryOnFakeClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := Policy{Base: time.Second, Cap: 10 * time.Second, Max: 3, NoJitter: true}
		start := time.Now()
		calls := 0
		var waits []time.Duration
		err := p.Retry(t.Context(), func(context.Context, int) error {
			calls++
			return errors.New("down")
		}, func(_ int, _ error, w time.Duration) { waits = append(waits, w) })
		if err == nil || err.Error() != "down" {
			t.Fatalf("got %v, want the last error", err)
		}
		if calls != 4 {
			t.Errorf("got %d calls, want 4 (1 + 3 retries)", calls)
		}
		if got, want := time.Since(start), 7*time.Second; got != want {
			t.Errorf("waited %v on the fake clock, want %v", got, want)
		}
		if len(waits) != 3 {
			t.Errorf("onRetry told %d times, want 3", len(waits))
		}
	})
}

func TestRetryStopsOnPermanentAndSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := errors.New("refused")
		n := 0
		err := Policy{}.Retry(t.Context(), func(context.Context, int) error { n++; return Permanent(base) }, nil)
		if err != base || n != 1 {
			t.Errorf("permanent: got %v after %d calls, want %v after 1", err, n, base)
		}
		n = 0
		err = Policy{}.Retry(t.Context(), func(_ context.Context, a int) error {
			n++
			if a < 3 {
				return errors.New("flaky")
			}
			return nil
		}, nil)
		if err != nil || n != 3 {
			t.Errorf("flaky: got %v after %d calls, want nil after 3", err, n)
		}
	})
}

func TestRetryHonoursRetryAfterAndContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		n := 0
		_ = Policy{Base: time.Millisecond, Max: 1, NoJitter: true}.Retry(t.Context(), func(context.Context, int) error {
			n++
			return After(errors.New("429"), 30*time.Second)
		}, nil)
		if got := time.Since(start); got != 30*time.Second {
			t.Errorf("waited %v, want the server's 30s", got)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		start = time.Now()
		err := Policy{Base: time.Hour}.Retry(ctx, func(context.Context, int) error { return errors.New("down") }, nil)
		if err == nil || time.Since(start) != 5*time.Second {
			t.Errorf("got %v after %v, want an error after the 5s deadline", err, time.Since(start))
		}
	})
}
