package sandboxd_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"conch"
	"conch/sandbox/sandboxd/sandboxdtest"
)

// Run with e.g.
//
//	go test -run '^$' -bench . -benchtime 1x ./sandbox/sandboxd
//
// Latency benchmarks measure every method in its own loop, at least
// sandboxdtest.MinSamples samples each, and report p50/p99 per method and
// each method's multiple of the agent over a subprocess (the shape conch
// runs in a sandbox).

// agentBase is the method the others are compared with.
const agentBase = "agent-subprocess"

// agentMethods returns one method per transport running op on a fresh agent.
func agentMethods(b *testing.B, op func(ctx context.Context, h *sandboxdtest.Host) error) []*sandboxdtest.Method {
	var out []*sandboxdtest.Method
	for _, tr := range transports {
		h := tr.new(b, b.TempDir())
		if _, err := h.Ping(context.Background()); err != nil { // dial outside the timing
			b.Fatal(err)
		}
		out = append(out, &sandboxdtest.Method{Name: "agent-" + tr.name, Run: func(ctx context.Context) error { return op(ctx, h) }})
	}
	return out
}

// BenchmarkExecTrue compares running `true` through the agent stream with
// os/exec on the host, the floor any exec path pays.
func BenchmarkExecTrue(b *testing.B) {
	methods := agentMethods(b, func(ctx context.Context, h *sandboxdtest.Host) error {
		res, err := h.Exec(ctx, conch.ExecRequest{Argv: []string{"true"}})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exit %d", res.ExitCode)
		}
		return err
	})
	methods = append(methods, &sandboxdtest.Method{Name: "host-os-exec", Run: func(context.Context) error {
		return exec.Command("true").Run()
	}})
	b.ResetTimer() // setup is not measured
	sandboxdtest.Measure(context.Background(), b, methods)
	sandboxdtest.Report(b, methods, agentBase, time.Microsecond)
}

// BenchmarkPing is the bare protocol round trip on an open stream.
func BenchmarkPing(b *testing.B) {
	methods := agentMethods(b, func(ctx context.Context, h *sandboxdtest.Host) error {
		_, err := h.Ping(ctx)
		return err
	})
	b.ResetTimer() // setup is not measured
	sandboxdtest.Measure(context.Background(), b, methods)
	sandboxdtest.Report(b, methods, agentBase, time.Microsecond)
}

// BenchmarkFileRoundTrip writes and reads back 4 KiB.
func BenchmarkFileRoundTrip(b *testing.B) {
	data := bytes.Repeat([]byte("x"), 4096)
	methods := agentMethods(b, func(ctx context.Context, h *sandboxdtest.Host) error {
		if err := h.WriteFile(ctx, "f", data, 0); err != nil {
			return err
		}
		_, err := h.ReadFile(ctx, "f", 0)
		return err
	})
	b.ResetTimer() // setup is not measured
	sandboxdtest.Measure(context.Background(), b, methods)
	sandboxdtest.Report(b, methods, agentBase, time.Microsecond)
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
// idle pings measured first on the same stream: the head-of-line cost.
func BenchmarkPingUnderLoad(b *testing.B) {
	for _, tr := range transports {
		b.Run(tr.name, func(b *testing.B) {
			h := tr.new(b, b.TempDir())
			ctx := context.Background()
			ping := func(ctx context.Context) error { _, err := h.Ping(ctx); return err }
			idle := &sandboxdtest.Method{Name: "idle", Run: ping}
			loaded := &sandboxdtest.Method{Name: "loaded", Run: ping}
			b.ResetTimer() // setup is not measured
			sandboxdtest.Measure(ctx, b, []*sandboxdtest.Method{idle})

			loadCtx, stop := context.WithCancel(ctx)
			var streamed atomic.Int64
			streaming := make(chan struct{})
			var once sync.Once
			loadDone := make(chan struct{})
			go func() {
				defer close(loadDone)
				h.Exec(loadCtx, conch.ExecRequest{
					Argv: []string{"cat", "/dev/zero"},
					OnOutput: func(p []byte) {
						streamed.Add(int64(len(p)))
						once.Do(func() { close(streaming) })
					},
				})
			}()
			<-streaming // measure under load only
			start, before := time.Now(), streamed.Load()
			sandboxdtest.Measure(ctx, b, []*sandboxdtest.Method{loaded})
			el, during := time.Since(start), streamed.Load()-before
			stop()
			<-loadDone
			sandboxdtest.Report(b, []*sandboxdtest.Method{idle, loaded}, "idle", time.Microsecond)
			b.ReportMetric(float64(during)/el.Seconds()/1e6, "load-MB/s")
		})
	}
}
