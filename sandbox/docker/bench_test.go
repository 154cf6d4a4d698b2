package docker_test

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"conch"
	"conch/internal/testenv/engine"
	"conch/sandbox/docker"
	"conch/sandbox/sandboxd/sandboxdtest"
)

// Run with e.g.
//
//	go test -run '^$' -bench . -benchtime 1x ./sandbox/docker
//
// Each benchmark measures every method in its own loop (never interleaved,
// so that one method's samples are not taken while the engine is still busy
// with another's), at least sandboxdtest.MinSamples samples each, and
// reports p50/p99 per method plus each method's multiple of the baseline.

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// benchCtx bounds one benchmark: hundreds of samples of a slow method take
// longer than a test's context allows.
func benchCtx(b *testing.B) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	b.Cleanup(cancel)
	return ctx
}

func eachEngineB(b *testing.B, f func(b *testing.B, eng *engine.Engine)) {
	for _, name := range []string{"docker", "podman"} {
		b.Run(name, func(b *testing.B) {
			var eng *engine.Engine
			if name == "docker" {
				eng = engine.Docker(b)
			} else {
				eng = engine.Podman(b)
			}
			f(b, eng)
		})
	}
}

// BenchmarkExecRoundTrip: a trivial command through the sandboxd,
// through one Engine API exec, and through the docker CLI.
func BenchmarkExecRoundTrip(b *testing.B) {
	eachEngineB(b, func(b *testing.B, eng *engine.Engine) {
		rt := newRuntime(b, eng, withAgent(b))
		ctx := benchCtx(b)
		sbi, err := rt.Sandbox(ctx, key("!bench:example.org"))
		if err != nil {
			b.Fatal(err)
		}
		sb := sbi.(*docker.Sandbox)
		req := conch.ExecRequest{Argv: []string{"true"}}
		check := func(res conch.ExecResult, err error) error {
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("exit %d: %s", res.ExitCode, res.Output)
			}
			return err
		}
		methods := []*sandboxdtest.Method{
			{Name: "agent", Run: func(ctx context.Context) error { return check(sb.Exec(ctx, req)) }},
			{Name: "engine-api", Run: func(ctx context.Context) error { return check(sb.EngineExec(ctx, req)) }},
		}
		if cli, err := exec.LookPath("docker"); err == nil {
			methods = append(methods, &sandboxdtest.Method{Name: "docker-cli", Run: func(ctx context.Context) error {
				out, err := exec.CommandContext(ctx, cli, "-H", eng.Host, "exec", sb.ID(), "true").CombinedOutput()
				if err != nil {
					return fmt.Errorf("docker exec: %v: %s", err, out)
				}
				return nil
			}})
		}
		b.ResetTimer() // setup is not measured
		sandboxdtest.Measure(ctx, b, methods)
		sandboxdtest.Report(b, methods, "agent", time.Millisecond)
	})
}

// firstCommandSamples is how many new conversations BenchmarkFirstCommand
// starts per method (at least): each is a container create, so 200 would
// take many minutes.
const firstCommandSamples = 20

// BenchmarkFirstCommand: the first command of a new conversation — a cold
// create, a warm-pool assignment, and a bare `docker run --rm` (CLI). Each
// conversation's sandbox is removed before the next sample, untimed.
func BenchmarkFirstCommand(b *testing.B) {
	eachEngineB(b, func(b *testing.B, eng *engine.Engine) {
		bin := engine.SandboxdBinary(b)
		cold := newRuntime(b, eng, func(o *docker.Options) { o.SandboxdBinary = bin })
		warm := newRuntime(b, eng, func(o *docker.Options) { o.SandboxdBinary = bin; o.WarmPool = 1 })
		ctx := benchCtx(b)
		n := 0
		last := map[*testRuntime]conch.ConversationKey{}
		first := func(rt *testRuntime) func(ctx context.Context) error {
			return func(ctx context.Context) error {
				n++
				k := key(fmt.Sprintf("!first-%d:example.org", n))
				last[rt] = k
				sb, err := rt.Sandbox(ctx, k)
				if err != nil {
					return err
				}
				res, err := sb.Exec(ctx, conch.ExecRequest{Argv: []string{"true"}})
				if err == nil && res.ExitCode != 0 {
					err = fmt.Errorf("exit %d", res.ExitCode)
				}
				return err
			}
		}
		// prepare removes the runtime's last sandbox and, for the warm
		// runtime, waits until the pool holds a ready container.
		prepare := func(rt *testRuntime) func(ctx context.Context) error {
			return func(ctx context.Context) error {
				if k, ok := last[rt]; ok {
					if err := rt.Remove(ctx, k); err != nil {
						return err
					}
				}
				return rt.FillPool(ctx)
			}
		}
		samples := max(b.N, firstCommandSamples)
		methods := []*sandboxdtest.Method{
			{Name: "cold", Run: first(cold), Prepare: prepare(cold), N: samples},
			{Name: "warm", Run: first(warm), Prepare: prepare(warm), N: samples},
		}
		if cli, err := exec.LookPath("docker"); err == nil {
			methods = append(methods, &sandboxdtest.Method{Name: "docker-run-cli", N: samples, Run: func(ctx context.Context) error {
				out, err := exec.CommandContext(ctx, cli, "-H", eng.Host, "run", "--rm", "--network", "none", eng.Image, "true").CombinedOutput()
				if err != nil {
					return fmt.Errorf("docker run: %v: %s", err, out)
				}
				return nil
			}})
		}
		b.ResetTimer() // setup is not measured
		sandboxdtest.Measure(ctx, b, methods)
		sandboxdtest.Report(b, methods, "cold", time.Millisecond)
		b.Logf("%s: warm p50 %.1f ms (target <= 50 ms)", eng.Name, ms(sandboxdtest.Pct(methods[1].Samples, 0.5)))
	})
}
