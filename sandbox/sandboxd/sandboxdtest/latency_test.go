package sandboxdtest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestMeasureTwiceKeepsBenchmarkFinite runs a benchmark that measures two
// phases, as BenchmarkPingUnderLoad does: the framework must see the time of
// both, so b.N settles near benchtime / (2 × op). Before the fix the second
// Measure reported 0 ns and b.N grew a hundredfold per round up to 10^8.
func TestMeasureTwiceKeepsBenchmarkFinite(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a benchmark for about a second")
	}
	const op = 20 * time.Microsecond
	// With the benchtime of 1 s, a correct run takes well under 200k
	// calls; the broken one passes it on its way to 10^8.
	const limit = 400_000
	var calls atomic.Int64
	run := func(context.Context) error {
		if calls.Add(1) > limit {
			return errors.New("too many samples: b.N is running away")
		}
		for t0 := time.Now(); time.Since(t0) < op; {
		}
		return nil
	}
	var maxN int
	r := testing.Benchmark(func(b *testing.B) {
		maxN = max(maxN, b.N)
		b.ResetTimer()
		Measure(t.Context(), b, []*Method{{Name: "idle", Run: run}})
		Measure(t.Context(), b, []*Method{{Name: "loaded", Run: run}})
	})
	if got := calls.Load(); got > limit {
		t.Fatalf("Measure ran %d samples (b.N up to %d), want at most %d", got, maxN, limit)
	}
	if r.N == 0 || r.T == 0 {
		t.Fatalf("benchmark result N=%d T=%v, want both measured", r.N, r.T)
	}
}
