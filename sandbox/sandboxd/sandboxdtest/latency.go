package sandboxdtest

import (
	"context"
	"slices"
	"testing"
	"time"
)

// MinSamples is how many samples a latency benchmark takes of each method
// at least, whatever b.N is: `-benchtime 1x` gives a full measurement.
const MinSamples = 200

// Method is one way of doing what a latency benchmark measures.
type Method struct {
	Name string
	Run  func(ctx context.Context) error
	// Prepare, if set, runs before each sample, untimed.
	Prepare func(ctx context.Context) error
	// N is the number of samples; 0 means max(b.N, MinSamples).
	N int
	// Samples are the measured durations.
	Samples []time.Duration
}

// Measure runs each method in its own loop, one method after the other
// (never interleaved, so that no method is measured while the engine or the
// host is still busy with another's work): one warm-up run, then
// max(b.N, MinSamples) timed runs (Method.N when set).
//
// The benchmark's timer runs during Measure and is stopped when it returns,
// so the time of several Measure calls in one run adds up and b.N grows with
// the whole measurement; call b.ResetTimer before the first one to leave
// setup out. (Measure used to reset the timer itself: a second call then
// found it stopped and reported 0 ns, and the framework raised b.N a
// hundredfold per round up to 10^8 samples, which never finished.)
func Measure(ctx context.Context, b *testing.B, methods []*Method) {
	b.Helper()
	b.StartTimer()
	for _, m := range methods {
		n := m.N
		if n <= 0 {
			n = max(b.N, MinSamples)
		}
		m.Samples = make([]time.Duration, 0, n)
		for i := range n + 1 {
			if m.Prepare != nil {
				if err := m.Prepare(ctx); err != nil {
					b.Fatalf("%s (prepare): %v", m.Name, err)
				}
			}
			t0 := time.Now()
			if err := m.Run(ctx); err != nil {
				b.Fatalf("%s: %v", m.Name, err)
			}
			if i > 0 { // the first run warms up
				m.Samples = append(m.Samples, time.Since(t0))
			}
		}
	}
	b.StopTimer()
}

// Pct is the p-quantile (0 < p ≤ 1) of d, nearest rank; 0 for no samples.
func Pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s))*p+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// Report reports p50 and p99 of every method in unit (time.Millisecond or
// time.Microsecond), and each method's p50 and p99 as a multiple of base's
// ("x-<base>"), as benchmark metrics. ns/op is zeroed: the metrics are the
// result.
func Report(b *testing.B, methods []*Method, base string, unit time.Duration) {
	b.Helper()
	suffix := map[time.Duration]string{time.Millisecond: "ms", time.Microsecond: "µs"}[unit]
	var bp50, bp99 time.Duration
	for _, m := range methods {
		if m.Name == base {
			bp50, bp99 = Pct(m.Samples, 0.5), Pct(m.Samples, 0.99)
		}
	}
	for _, m := range methods {
		if len(m.Samples) == 0 {
			continue
		}
		p50, p99 := Pct(m.Samples, 0.5), Pct(m.Samples, 0.99)
		b.ReportMetric(float64(p50)/float64(unit), m.Name+"-p50-"+suffix)
		b.ReportMetric(float64(p99)/float64(unit), m.Name+"-p99-"+suffix)
		if m.Name != base && bp50 > 0 && bp99 > 0 {
			b.ReportMetric(float64(p50)/float64(bp50), m.Name+"-p50-x-"+base)
			b.ReportMetric(float64(p99)/float64(bp99), m.Name+"-p99-x-"+base)
		}
	}
	b.ReportMetric(0, "ns/op")
}
