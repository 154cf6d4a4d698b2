package docker_test

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"testing"
	"time"

	"conch"
	"conch/internal/testenv/engine"
	"conch/sandbox/docker"
)

// Run with e.g.
//
//	go test -run '^$' -bench . -benchtime 200x ./sandbox/docker
//
// Each benchmark measures every method in the same run, interleaved, and
// reports p50/p99 per method plus the ratios against the baseline.

type sampler struct {
	name string
	run  func(ctx context.Context) error
	d    []time.Duration
}

func pct(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p)
	return s[i]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func report(b *testing.B, ss []*sampler, base string) {
	var baseP50 time.Duration
	for _, s := range ss {
		if s.name == base && len(s.d) > 0 {
			baseP50 = pct(s.d, 0.5)
		}
	}
	for _, s := range ss {
		if len(s.d) == 0 {
			continue
		}
		p50, p99 := pct(s.d, 0.5), pct(s.d, 0.99)
		b.ReportMetric(ms(p50), s.name+"-p50-ms")
		b.ReportMetric(ms(p99), s.name+"-p99-ms")
		if s.name != base && baseP50 > 0 {
			b.ReportMetric(float64(p50)/float64(baseP50), s.name+"/"+base+"-p50-x")
		}
	}
	b.ReportMetric(0, "ns/op") // per-method metrics above are the result
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

// BenchmarkExecRoundTrip: a trivial command through the in-sandbox agent,
// through one Engine API exec, and through the docker CLI.
func BenchmarkExecRoundTrip(b *testing.B) {
	eachEngineB(b, func(b *testing.B, eng *engine.Engine) {
		rt := newRuntime(b, eng, withAgent(b))
		ctx := ctxT(b)
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
		ss := []*sampler{
			{name: "agent", run: func(ctx context.Context) error { return check(sb.Exec(ctx, req)) }},
			{name: "engine-api", run: func(ctx context.Context) error { return check(sb.EngineExec(ctx, req)) }},
		}
		if cli, err := exec.LookPath("docker"); err == nil {
			ss = append(ss, &sampler{name: "docker-cli", run: func(ctx context.Context) error {
				out, err := exec.CommandContext(ctx, cli, "-H", eng.Host, "exec", sb.ID(), "true").CombinedOutput()
				if err != nil {
					return fmt.Errorf("docker exec: %v: %s", err, out)
				}
				return nil
			}})
		}
		for _, s := range ss { // warm up
			if err := s.run(ctx); err != nil {
				b.Fatalf("%s: %v", s.name, err)
			}
		}
		b.ResetTimer()
		for range b.N {
			for _, s := range ss {
				start := time.Now()
				if err := s.run(ctx); err != nil {
					b.Fatalf("%s: %v", s.name, err)
				}
				s.d = append(s.d, time.Since(start))
			}
		}
		b.StopTimer()
		report(b, ss, "agent")
	})
}

// BenchmarkFirstCommand: the first command of a new conversation — a cold
// create, a warm-pool assignment, and a bare `docker run --rm` (CLI).
func BenchmarkFirstCommand(b *testing.B) {
	eachEngineB(b, func(b *testing.B, eng *engine.Engine) {
		bin := engine.AgentBinary(b)
		cold := newRuntime(b, eng, func(o *docker.Options) { o.AgentBinary = bin })
		warm := newRuntime(b, eng, func(o *docker.Options) { o.AgentBinary = bin; o.WarmPool = 1 })
		ctx := ctxT(b)
		n := 0
		first := func(rt *testRuntime) func(ctx context.Context) error {
			return func(ctx context.Context) error {
				n++
				sb, err := rt.Sandbox(ctx, key(fmt.Sprintf("!first-%d:example.org", n)))
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
		ss := []*sampler{{name: "cold", run: first(cold)}, {name: "warm", run: first(warm)}}
		if cli, err := exec.LookPath("docker"); err == nil {
			ss = append(ss, &sampler{name: "docker-run-cli", run: func(ctx context.Context) error {
				out, err := exec.CommandContext(ctx, cli, "-H", eng.Host, "run", "--rm", "--network", "none", eng.Image, "true").CombinedOutput()
				if err != nil {
					return fmt.Errorf("docker run: %v: %s", err, out)
				}
				return nil
			}})
		}
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			if err := warm.FillPool(ctx); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			for _, s := range ss {
				start := time.Now()
				if err := s.run(ctx); err != nil {
					b.Fatalf("%s: %v", s.name, err)
				}
				s.d = append(s.d, time.Since(start))
			}
		}
		b.StopTimer()
		report(b, ss, "cold")
		if w := ss[1].d; len(w) > 0 {
			b.Logf("%s: warm p50 %.1f ms (target <= 50 ms)", eng.Name, ms(pct(w, 0.5)))
		}
	})
}
