package docker_test

import (
	"strings"
	"testing"
	"time"

	"conch"
	"conch/internal/testenv/engine"
	"conch/sandbox/docker"

	"github.com/moby/moby/client"
)

// TestReconcileReconnectsAgents: after a restart, Reconcile starts the
// agent of every sandbox it reattached running, in the background and
// before any operation asks for it, so that the conversations' first
// messages do not each wait for an engine exec; a sandbox stopped meanwhile
// gets none (it starts on its next use). HasSandbox tells a conversation
// with a sandbox from one without, from memory or with one inspect. Over
// the exec transport the agents end with conch and are started again; over
// the socket transport they outlive conch and are dialled again, never a
// second agent.
func TestReconcileReconnectsAgents(t *testing.T) {
	for _, transport := range []string{docker.TransportExec, docker.TransportSocket} {
		t.Run(transport, func(t *testing.T) { testReconcileReconnectsAgents(t, transport) })
	}
}

func testReconcileReconnectsAgents(t *testing.T, transport string) {
	eng := engine.Docker(t)
	agent := withAgent(t)
	rt := newRuntime(t, eng, func(o *docker.Options) { agent(o); o.Transport = transport })
	ctx := ctxT(t)
	live, stopped := key("!live:example.org"), key("!stopped:example.org")
	ids := map[string]string{}
	for name, k := range map[string]conch.ConversationKey{"live": live, "stopped": stopped} {
		sb, err := rt.Sandbox(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if res := run(t, sb, "true"); res.ExitCode != 0 {
			t.Fatalf("%s: %+v", name, res)
		}
		ids[name] = sb.(*docker.Sandbox).ID()
	}
	if !rt.HasSandbox(ctx, live) || rt.HasSandbox(ctx, key("!never:example.org")) {
		t.Fatal("HasSandbox: want true for a conversation with a sandbox, false for one without")
	}
	api := eng.Client(t)
	agents := func(id string) int {
		top, err := api.ContainerTop(ctx, id, client.ContainerTopOptions{})
		if err != nil {
			return -1
		}
		n := 0
		for _, p := range top.Processes {
			if strings.Contains(strings.Join(p, " "), "sandbox-agent") {
				n++
			}
		}
		return n
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting until %s", what)
			}
		}
	}
	if agents(ids["live"]) != 1 {
		t.Fatalf("before the restart: %d agents in the live sandbox, want 1", agents(ids["live"]))
	}
	rt.Close()
	if transport == docker.TransportExec {
		// The agents' streams end, and the agents with them.
		waitFor("the agents ended with conch", func() bool { return agents(ids["live"]) == 0 })
	} else if n := agents(ids["live"]); n != 1 {
		t.Fatalf("after conch stopped: %d agents in the live sandbox, want the one listening on its socket", n)
	}
	if _, err := api.ContainerStop(ctx, ids["stopped"], client.ContainerStopOptions{}); err != nil {
		t.Fatal(err)
	}

	rt2 := reopen(t, eng, rt.opts)
	if !rt2.HasSandbox(ctx, stopped) {
		t.Error("HasSandbox before Reconcile: a stopped sandbox is a sandbox")
	}
	if err := rt2.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor("the live sandbox's agent runs again, with no operation asking", func() bool { return agents(ids["live"]) == 1 })
	if n := agents(ids["stopped"]); n > 0 {
		t.Errorf("the stopped sandbox was started for its agent (%d agents)", n)
	}
	// The reconnected agent serves the first operation, once.
	sb, err := rt2.Sandbox(ctx, live)
	if err != nil {
		t.Fatal(err)
	}
	if res := run(t, sb, "echo", "again"); out(res) != "again" {
		t.Fatalf("after the restart: %+v", res)
	}
	if n := agents(ids["live"]); n != 1 {
		t.Errorf("%d agents in the live sandbox after its first operation, want the one reconnected", n)
	}
}
