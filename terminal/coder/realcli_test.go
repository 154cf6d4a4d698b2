package coder_test

import (
	"context"
	"encoding/pem"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"conch"
	"conch/egress"
	"conch/internal/testenv/fakellm"
	"conch/internal/testenv/realcli"
	"conch/sandbox/docker"
	"conch/terminal"
	"conch/terminal/coder"
	"conch/terminal/terminaltest"
)

// The real Gemini CLI in a real, network-less sandbox container, driven by
// the Coder with the Gemini profile: it reaches a wire-exact fake Gemini API
// served over TLS on the host only through the allowlisting egress proxy,
// its AfterAgent hook ends the turn, and its second turn carries the first.
func TestRealGeminiCLI(t *testing.T) {
	cli := realcli.Gemini(t)
	llm := fakellm.New(t, fakellm.TLS())
	// The "?" of the second task proves the text is pasted: typed, the CLI
	// takes "?" as its shortcuts key and drops it from the input. The
	// first task may reach the CLI while it still initializes, before it
	// switches bracketed paste on, so it has none.
	const ask1, ask2 = "Name the capital of France.", "What did I ask you before?"
	const first, second = "The capital of France is Paris.", "Earlier you asked me about the capital of France."
	llm.Handle(func(r fakellm.Request) fakellm.Reply {
		last := r.Messages[len(r.Messages)-1].Text
		switch {
		case strings.Contains(last, ask1):
			return fakellm.Text(first)
		case strings.Contains(last, ask2):
			return fakellm.Text(second)
		}
		return fakellm.Error(400, "fakellm test: unexpected request: "+last)
	})
	u, err := url.Parse(llm.URL())
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())

	b := terminaltest.Container(t)
	mount := stageCLI(t, b, cli, llm)
	tunnels, bridges := egressTo(t, port)

	m := terminal.NewManager(b.SB, terminal.NewMemRegistry(), b.Opts)
	t.Cleanup(m.Detach)
	p := coder.Gemini()
	p.Command = cli.Command(mount)
	c := coder.For(m, testKey, p, coder.Options{
		StartTimeout: 2 * time.Minute,
		TurnTimeout:  2 * time.Minute,
		Env: []string{
			p.BaseURLEnv + "=" + llm.URL(),
			p.APIKeyEnv + "=test-key",
			// A fixed model: "auto" would first ask a routing classifier.
			"GEMINI_MODEL=gemini-2.5-flash",
			"NODE_EXTRA_CA_CERTS=" + mount + "/ca.pem",
		},
		Egress: bridges.ProxyURL,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	res, err := c.Task(ctx, ask1, nil)
	mustTurn(t, "first task", res, err, coder.TurnIdle)
	if !res.Started || !res.Hook {
		t.Errorf("first task: got started=%v hook=%v, want the CLI started and the turn ended by its AfterAgent hook", res.Started, res.Hook)
	}
	contains(t, "first task", res.Text, first)
	for _, chrome := range []string{"Type your message", "? for shortcuts", "╭"} {
		if strings.Contains(res.Text, chrome) {
			t.Errorf("first task: decoration %q left in the text:\n%s", chrome, res.Text)
		}
	}
	if data, err := b.SB.ReadFile(ctx, m.Options().RunDir+"/turn-gemini", 1<<10); err != nil || len(data) == 0 {
		t.Errorf("turn marker file: got %q, %v; want a line per turn", data, err)
	}

	res, err = c.Task(ctx, ask2, nil)
	mustTurn(t, "second task", res, err, coder.TurnIdle)
	if res.Started || !res.Hook {
		t.Errorf("second task: got started=%v hook=%v, want the same CLI and its hook", res.Started, res.Hook)
	}
	contains(t, "second task", res.Text, second)

	reqs := llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the fake API got %d requests, want 2", len(reqs))
	}
	r := reqs[1]
	if !strings.HasSuffix(r.Path, "/models/gemini-2.5-flash:streamGenerateContent") || r.APIKey != "test-key" {
		t.Errorf("second request: got %s with key %q, want the streaming call with test-key", r.Path, r.APIKey)
	}
	checkExchange(t, r, []string{ask1, first, ask2})

	// Ending the CLI closes its connection: the proxy reports the tunnel.
	if res, err := b.SB.Exec(ctx, conch.ExecRequest{Argv: []string{"tmux", "-S", m.Options().RunDir + "/tmux.sock", "kill-session", "-t", "code"}, Timeout: 30 * time.Second}); err != nil || res.ExitCode != 0 {
		t.Fatalf("end the CLI: %v %s", err, res.Output)
	}
	waitTunnel(t, tunnels, "127.0.0.1:"+u.Port())
}

// stageCLI puts the CLI and the fake API's certificate where the sandbox
// sees them; it returns that directory as the sandbox sees it.
func stageCLI(t *testing.T, b *terminaltest.Box, cli *realcli.CLI, llm *fakellm.Server) string {
	t.Helper()
	stage := filepath.Join(b.AgentDir, "realcli")
	if err := cli.Stage(stage); err != nil {
		t.Fatal(err)
	}
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: llm.Certificate().Raw})
	if err := os.WriteFile(filepath.Join(stage, "ca.pem"), ca, 0o644); err != nil {
		t.Fatal(err)
	}
	return docker.AgentDir + "/realcli"
}

// egressTo returns bridges to a proxy that allows 127.0.0.1:port and
// reports each tunnel when it closes.
func egressTo(t *testing.T, port int) (<-chan egress.Event, *egress.Bridges) {
	t.Helper()
	tunnels := make(chan egress.Event, 64)
	proxy := egress.New(egress.Options{Hosts: []string{"127.0.0.1"}, Ports: []int{port}, AllowPrivate: true,
		OnTunnel: func(e egress.Event) {
			select {
			case tunnels <- e:
			default:
			}
		}})
	bridges := egress.NewBridges(proxy, egress.BridgeOptions{})
	t.Cleanup(func() { bridges.Close() })
	return tunnels, bridges
}

// checkExchange: the CLI sends its session context first, in the first
// user message (or one of its own); the exchange (ask, answer, ask)
// follows in order.
func checkExchange(t *testing.T, r fakellm.Request, words []string) {
	t.Helper()
	var history strings.Builder
	var order []string
	for _, msg := range r.Messages {
		fmt.Fprintf(&history, "%s: %s\n", msg.Role, msg.Text)
		for _, w := range words {
			if strings.Contains(msg.Text, w) {
				order = append(order, msg.Role+": "+w)
			}
		}
	}
	if want := []string{"user: " + words[0], "assistant: " + words[1], "user: " + words[2]}; strings.Join(order, "|") != strings.Join(want, "|") {
		t.Errorf("second request: got exchange %q, want %q; history:\n%s", order, want, history.String())
	}
}

// waitTunnel waits for the proxy to report a tunnel to target that
// carried data back.
func waitTunnel(t *testing.T, tunnels <-chan egress.Event, target string) {
	t.Helper()
	wait := time.After(30 * time.Second)
	var seen []egress.Event
	for {
		select {
		case e := <-tunnels:
			seen = append(seen, e)
			if e.Target == target && e.Allowed && e.Down > 0 {
				return
			}
		case <-wait:
			t.Fatalf("egress: got tunnels %+v, want the API reached through the proxy at %s", seen, target)
		}
	}
}
