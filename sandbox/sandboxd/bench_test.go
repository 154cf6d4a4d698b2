package sandboxd_test

import (
	"bytes"
	"context"
	"os/exec"
	"slices"
	"testing"
	"time"

	"conch"
	"conch/sandbox/sandboxd/sandboxdtest"
)

// latencies collects per-iteration durations and reports percentiles.
type latencies []time.Duration

func (l latencies) pct(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func (l latencies) report(b *testing.B) {
	b.ReportMetric(float64(l.pct(0.50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(l.pct(0.99).Microseconds()), "p99-µs")
}

// BenchmarkExecTrue compares running `true` through the agent stream with
// os/exec on the host, the floor any exec path pays. The agent results
// carry their p50 as a multiple of the host p50 measured in the same run.
func BenchmarkExecTrue(b *testing.B) {
	var hostP50 time.Duration
	b.Run("host-os-exec", func(b *testing.B) {
		var lat latencies
		for b.Loop() {
			t0 := time.Now()
			if err := exec.Command("true").Run(); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		lat.report(b)
		hostP50 = lat.pct(0.5)
	})
	for _, tr := range transports {
		b.Run("agent-"+tr.name, func(b *testing.B) {
			h := tr.new(b, b.TempDir())
			ctx := context.Background()
			if _, err := h.Ping(ctx); err != nil { // dial outside the timing
				b.Fatal(err)
			}
			var lat latencies
			for b.Loop() {
				t0 := time.Now()
				res, err := h.Exec(ctx, conch.ExecRequest{Argv: []string{"true"}})
				if err != nil || res.ExitCode != 0 {
					b.Fatal(res, err)
				}
				lat = append(lat, time.Since(t0))
			}
			lat.report(b)
			if hostP50 > 0 {
				b.ReportMetric(float64(lat.pct(0.5))/float64(hostP50), "x-host-p50")
			}
		})
	}
}

// BenchmarkPing is the bare protocol round trip on an open stream.
func BenchmarkPing(b *testing.B) {
	for _, tr := range transports {
		b.Run(tr.name, func(b *testing.B) {
			h := tr.new(b, b.TempDir())
			ctx := context.Background()
			if _, err := h.Ping(ctx); err != nil {
				b.Fatal(err)
			}
			var lat latencies
			for b.Loop() {
				t0 := time.Now()
				if _, err := h.Ping(ctx); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			lat.report(b)
		})
	}
}

// BenchmarkFileRoundTrip writes and reads back 4 KiB.
func BenchmarkFileRoundTrip(b *testing.B) {
	h := sandboxdtest.HostSandbox(b, b.TempDir())
	ctx := context.Background()
	data := bytes.Repeat([]byte("x"), 4096)
	var lat latencies
	for b.Loop() {
		t0 := time.Now()
		if err := h.WriteFile(ctx, "f", data, 0); err != nil {
			b.Fatal(err)
		}
		if _, err := h.ReadFile(ctx, "f", 0); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	lat.report(b)
}

// BenchmarkOutputThroughput streams 64 MiB of program output.
func BenchmarkOutputThroughput(b *testing.B) {
	for _, tr := range transports {
		b.Run(tr.name, func(b *testing.B) {
			h := tr.new(b, b.TempDir())
			ctx := context.Background()
			const size = 64 << 20
			b.SetBytes(size)
			for b.Loop() {
				n := 0
				_, err := h.Exec(ctx, conch.ExecRequest{
					Argv:     []string{"head", "-c", "67108864", "/dev/zero"},
					OnOutput: func(p []byte) { n += len(p) },
				})
				if err != nil || n != size {
					b.Fatal(n, err)
				}
			}
		})
	}
}

// BenchmarkPingUnderLoad measures the round trip of a small request while
// another exec streams output as fast as it can on the same stream, against
// idle pings measured in the same run: the head-of-line cost.
func BenchmarkPingUnderLoad(b *testing.B) {
	for _, tr := range transports {
		b.Run(tr.name, func(b *testing.B) {
			h := tr.new(b, b.TempDir())
			ctx := context.Background()
			var idle latencies
			for range 500 {
				t0 := time.Now()
				if _, err := h.Ping(ctx); err != nil {
					b.Fatal(err)
				}
				idle = append(idle, time.Since(t0))
			}
			loadCtx, stop := context.WithCancel(ctx)
			var streamed int64
			loadDone := make(chan struct{})
			go func() {
				defer close(loadDone)
				h.Exec(loadCtx, conch.ExecRequest{
					Argv:     []string{"cat", "/dev/zero"},
					OnOutput: func(p []byte) { streamed += int64(len(p)) },
				})
			}()
			var lat latencies
			start := time.Now()
			for b.Loop() {
				t0 := time.Now()
				if _, err := h.Ping(ctx); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			el := time.Since(start)
			stop()
			<-loadDone
			lat.report(b)
			b.ReportMetric(float64(lat.pct(0.5))/float64(idle.pct(0.5)), "x-idle-p50")
			b.ReportMetric(float64(streamed)/el.Seconds()/1e6, "load-MB/s")
		})
	}
}
