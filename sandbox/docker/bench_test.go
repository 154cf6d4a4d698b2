package docker_test

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
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

// BenchmarkExecRoundTrip: a trivial command (`true`) in the sandbox
// through the sandboxd over its unix socket ("agent"), against the host's own
// fork+exec of `true` ("host", the baseline of goal row 1); for context the
// sandboxd over the exec stream the engine relays ("agent-exec", the
// transport before the socket and Kubernetes' today), one Engine API exec per
// command ("engine-api") and the docker CLI ("docker-cli").
func BenchmarkExecRoundTrip(b *testing.B) {
	eachEngineB(b, func(b *testing.B, eng *engine.Engine) {
		ctx := benchCtx(b)
		sandbox := func(transport string) *docker.Sandbox {
			rt := newRuntime(b, eng, func(o *docker.Options) { withAgent(b)(o); o.Transport = transport })
			sbi, err := rt.Sandbox(ctx, key("!bench:example.org"))
			if err != nil {
				b.Fatal(err)
			}
			return sbi.(*docker.Sandbox)
		}
		sb, sbExec := sandbox(docker.TransportSocket), sandbox(docker.TransportExec)
		req := conch.ExecRequest{Argv: []string{"true"}}
		check := func(res conch.ExecResult, err error) error {
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("exit %d: %s", res.ExitCode, res.Output)
			}
			return err
		}
		truePath, err := exec.LookPath("true")
		if err != nil {
			b.Fatal(err)
		}
		methods := []*sandboxdtest.Method{
			{Name: "host", Run: func(ctx context.Context) error { return exec.CommandContext(ctx, truePath).Run() }},
			{Name: "agent", Run: func(ctx context.Context) error { return check(sb.Exec(ctx, req)) }},
			{Name: "agent-exec", Run: func(ctx context.Context) error { return check(sbExec.Exec(ctx, req)) }},
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
		sandboxdtest.Report(b, methods, "host", time.Millisecond)
	})
}

// BenchmarkExitNoticed: from a command's own exit to conch noticing it
// (Exec returning). The command is `date +%s%N`: it reads CLOCK_REALTIME,
// prints it and exits (the container shares the host kernel's clock); the
// sample is the time Exec returned minus that reading, so it also counts
// date's own formatting and exit after the reading (an overestimate). Goal
// row 2 is "agent" (the socket); "agent-exec" is the exec stream, for
// context.
func BenchmarkExitNoticed(b *testing.B) {
	eachEngineB(b, func(b *testing.B, eng *engine.Engine) {
		ctx := benchCtx(b)
		sandbox := func(transport string) *docker.Sandbox {
			rt := newRuntime(b, eng, func(o *docker.Options) { withAgent(b)(o); o.Transport = transport })
			sbi, err := rt.Sandbox(ctx, key("!exit:example.org"))
			if err != nil {
				b.Fatal(err)
			}
			return sbi.(*docker.Sandbox)
		}
		methods := []*sandboxdtest.Method{{Name: "agent"}, {Name: "agent-exec"}}
		sbs := []*docker.Sandbox{sandbox(docker.TransportSocket), sandbox(docker.TransportExec)}
		b.ResetTimer()
		for i, m := range methods {
			n := max(b.N, sandboxdtest.MinSamples)
			for j := range n + 1 {
				res, err := sbs[i].Exec(ctx, conch.ExecRequest{Argv: []string{"date", "+%s%N"}})
				noticed := time.Now()
				if err != nil || res.ExitCode != 0 {
					b.Fatalf("%s: %+v %v", m.Name, res, err)
				}
				ns, err := strconv.ParseInt(strings.TrimSpace(string(res.Output)), 10, 64)
				if err != nil {
					b.Fatalf("%s: date printed %q", m.Name, res.Output)
				}
				if j > 0 {
					m.Samples = append(m.Samples, noticed.Sub(time.Unix(0, ns)))
				}
			}
		}
		b.StopTimer()
		sandboxdtest.Report(b, methods, "agent", time.Millisecond)
	})
}

// firstCommandSamples is how many new conversations BenchmarkFirstCommand
// starts per method (at least): each is a container create, so 200 would
// take many minutes.
const firstCommandSamples = 20

// BenchmarkFirstCommand: the first command (`true`) of a new conversation —
// a cold create ("cold": volume, container, start, agent, command), a
// warm-pool assignment ("warm"), and the baseline of goal row 3,
// "docker-run": `docker run --rm --network none IMAGE true` through the
// docker CLI (the CLI's start, create, attach, start, the command, wait and
// removal of the container). Each conversation's sandbox is removed before
// the next sample, untimed.
func BenchmarkFirstCommand(b *testing.B) {
	eachEngineB(b, func(b *testing.B, eng *engine.Engine) {
		bin := engine.SandboxdBinary(b)
		cold := newRuntime(b, eng, func(o *docker.Options) { o.SandboxdBinary = bin })
		warm := newRuntime(b, eng, func(o *docker.Options) { o.SandboxdBinary = bin; o.WarmPool = 1 })
		ctx := benchCtx(b)
		// As conch up does at start: the runtimes then know their
		// containers' names.
		for _, rt := range []*testRuntime{cold, warm} {
			if err := rt.Reconcile(ctx); err != nil {
				b.Fatal(err)
			}
		}
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
			methods = append(methods, &sandboxdtest.Method{Name: "docker-run", N: samples, Run: func(ctx context.Context) error {
				out, err := exec.CommandContext(ctx, cli, "-H", eng.Host, "run", "--rm", "--network", "none", eng.Image, "true").CombinedOutput()
				if err != nil {
					return fmt.Errorf("docker run: %v: %s", err, out)
				}
				return nil
			}})
		}
		b.ResetTimer() // setup is not measured
		sandboxdtest.Measure(ctx, b, methods)
		sandboxdtest.Report(b, methods, "docker-run", time.Millisecond)
	})
}
