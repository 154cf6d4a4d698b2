package docker_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"conch"
	"conch/internal/testenv/engine"
	"conch/sandbox/sandboxd/sandboxdtest"
)

// BenchmarkAgentsAfterRestart is the floor under BenchmarkRestart
// (cmd/conch): 20 running sandboxes, one command in each at once, with
// their agents connected ("connected") and as the first operation of a new
// Runtime over the same containers, as after a restart of conch without
// Reconcile's background reconnection ("restart": inspect, adopt, an engine
// exec for the agent, then the command). Each sample is the time until all
// 20 commands are done.
func BenchmarkAgentsAfterRestart(b *testing.B) {
	const n, rounds = 20, 3
	eng := engine.Docker(b)
	rt := newRuntime(b, eng, withAgent(b))
	ctx := ctxT(b)
	keys := make([]conch.ConversationKey, n)
	for i := range keys {
		keys[i] = key(fmt.Sprintf("!bench%d:example.org", i))
	}
	all := func(r *testRuntime) time.Duration {
		t0 := time.Now()
		var wg sync.WaitGroup
		for _, k := range keys {
			wg.Go(func() {
				sb, err := r.Sandbox(ctx, k)
				if err != nil {
					b.Error(err)
					return
				}
				if res, err := sb.Exec(ctx, conch.ExecRequest{Argv: []string{"true"}, Timeout: time.Minute}); err != nil || res.ExitCode != 0 {
					b.Errorf("exec: %v %+v", err, res)
				}
			})
		}
		wg.Wait()
		return time.Since(t0)
	}
	all(rt) // the containers exist, their agents connected
	b.ResetTimer()
	connected := &sandboxdtest.Method{Name: "connected"}
	for range 5 {
		connected.Samples = append(connected.Samples, all(rt))
	}
	restart := &sandboxdtest.Method{Name: "restart"}
	for range rounds {
		rt.Close()
		rt = reopen(b, eng, rt.opts)
		restart.Samples = append(restart.Samples, all(rt))
	}
	b.StopTimer()
	sandboxdtest.Report(b, []*sandboxdtest.Method{connected, restart}, "connected", time.Millisecond)
}
