package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"conch"
	"conch/egress"
	"conch/internal/backoff"
	"conch/internal/testenv/engine"
	"conch/sandbox/docker"
)

// buildTestServer builds the stdio test server (the Go SDK's, a static
// binary the sandbox image can run).
func buildTestServer(t *testing.T) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "mcptestserver")
	cmd := exec.Command("go", "build", "-o", out, "./internal/testenv/mcpserver/cmd/mcptestserver")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the test server: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// hostAddr is an address of this host that is not loopback, with a
// listener on it: what a sandbox must not reach.
func hostAddr(t *testing.T) string {
	t.Helper()
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil && !ip.IP.IsLoopback() {
			l, err := net.Listen("tcp", ip.IP.String()+":0")
			if err != nil {
				continue
			}
			t.Cleanup(func() { l.Close() })
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					c.Close()
				}
			}()
			return l.Addr().String()
		}
	}
	return "10.0.2.2:80"
}

// countServers counts the test server's processes in the sandbox.
func countServers(t *testing.T, sb conch.Sandbox) string {
	t.Helper()
	res, err := sb.Exec(context.Background(), conch.ExecRequest{Argv: []string{"sh", "-c",
		`n=0; for p in /proc/[0-9]*; do case "$(tr '\0' ' ' < $p/cmdline 2>/dev/null)" in *mcp""testserver*) n=$((n+1));; esac; done; echo $n`}})
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(res.Output))
}

// TestStdioServerInSandbox runs a real stdio MCP server (the Go SDK's)
// inside a real sandbox: its tools work across turns with one instance;
// it finds no network and no host; invalid JSON, a flood and a crash are
// clear results and the server is started again after the backoff; the
// conversation's end ends it.
func TestStdioServerInSandbox(t *testing.T) {
	e := engine.Docker(t)
	bin := buildTestServer(t)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rt, err := docker.New(ctx, docker.Options{Host: e.Host, Engine: e.Name, InstanceID: "mcp-" + hex.EncodeToString(b), Image: e.Image,
		DataDir: t.TempDir(), CacheDir: e.CacheDir, SandboxdBinary: engine.SandboxdBinary(t)})
	if err != nil {
		t.Fatal(err)
	}
	key := conch.ConversationKey{Channel: "cli", ID: "mcp-" + hex.EncodeToString(b)}
	t.Cleanup(func() {
		_ = rt.Remove(context.Background(), key)
		rt.Close()
	})
	sb, err := rt.Sandbox(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.WriteFile(ctx, "/workspace/.mcp/mcptestserver", bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// The api server may reach one API through conch's injecting egress:
	// the secret is added on the host, the sandbox has a placeholder.
	const secret = "real-api-secret-0123456789"
	var gotAuth atomic.Value
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth.Store(r.Header.Get("Authorization"))
		if r.Header.Get("Authorization") != "Bearer "+secret {
			http.Error(w, "who are you?", http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, "hello at %s", r.URL.Path)
	}))
	defer upstream.Close()
	in, err := egress.NewInjector(egress.InjectorOptions{Header: "Authorization", Prefix: "Bearer ", Key: secret, BaseURL: upstream.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	bridges := egress.NewBridges(in, egress.BridgeOptions{})
	defer bridges.Close()
	api := Server{Name: "api", Argv: []string{"/workspace/.mcp/mcptestserver"}, Timeout: 20 * time.Second,
		Egress: func(ctx context.Context, key conch.ConversationKey, sb conch.Sandbox) ([]string, error) {
			origin, err := bridges.URL(ctx, key, sb)
			if err != nil {
				return nil, err
			}
			return []string{"API_URL=" + in.ClientBaseURL(origin), "API_TOKEN=" + egress.PlaceholderKey, "HTTPS_PROXY=" + origin}, nil
		}}
	c, err := New(Options{
		Servers:         []Server{{Name: "local", Argv: []string{"/workspace/.mcp/mcptestserver"}, Timeout: 20 * time.Second}, api},
		Backoff:         backoff.Policy{Base: 300 * time.Millisecond, Cap: time.Second, NoJitter: true},
		MaxMessageBytes: 1 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	env := conch.ToolEnv{Conversation: key, Sandboxes: rt}
	call := func(name, args string) conch.ToolOutput {
		t.Helper()
		tools := toolsByName(c.Tools(ctx, env))
		tool := tools[name]
		if tool == nil {
			t.Fatalf("no tool %s; have %v; states %+v", name, keys(tools), c.States(key))
		}
		out, err := tool.Run(ctx, env, []byte(args))
		if err != nil {
			t.Fatalf("%s: Go error %v", name, err)
		}
		return out
	}
	if out := call("mcp__local__echo", `{"text":"from the sandbox"}`); out.Content != "echo: from the sandbox" {
		t.Fatalf("echo: %+v", out)
	}
	if out := call("mcp__local__picture", `{}`); len(out.Images) != 1 {
		t.Errorf("picture: %+v", out)
	}
	// Kept across turns: one instance.
	call("mcp__local__echo", `{"text":"again"}`)
	if n := countServers(t, sb); n != "2" {
		t.Errorf("%s server processes after three calls, want 2 (api and local)", n)
	}

	host := hostAddr(t)
	out := call("mcp__local__net", `{"addrs":["1.1.1.1:443","`+host+`","172.17.0.1:2375"]}`)
	if strings.Contains(out.Content, "REACHED") || !strings.Contains(out.Content, "dns: failed") {
		t.Errorf("the sandboxed server reached the network or the host:\n%s", out.Content)
	}

	if out := call("mcp__api__fetch", `{"path":"/whoami"}`); out.Content != "200 hello at /whoami" {
		t.Errorf("the API through egress: %+v (upstream saw %v)", out, gotAuth.Load())
	}
	if res, err := sb.Exec(ctx, conch.ExecRequest{Argv: []string{"sh", "-c", "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c " + secret}}); err != nil || strings.TrimSpace(string(res.Output)) != "0" {
		t.Errorf("the secret is in the sandbox's environments: %q %v", res.Output, err)
	}

	// Invalid JSON on stdout: a result, then a restart.
	if out := call("mcp__local__garbage", `{}`); !out.IsError {
		t.Errorf("garbage on stdout: %+v", out)
	}
	waitUp(t, c, key, call)

	// A flood larger than a message may be.
	if out := call("mcp__local__huge", `{"bytes":3000000}`); !out.IsError {
		t.Errorf("a 3 MB message was not refused: %d chars", len(out.Content))
	}
	waitUp(t, c, key, call)

	// A crash: its last words are in the error, /status says it is down.
	out = call("mcp__local__crash", `{}`)
	if !out.IsError {
		t.Errorf("crash: %+v", out)
	}
	if lines := c.Status(ctx, key); len(lines) != 2 || !strings.Contains(lines[0], "ready") || !strings.Contains(lines[1], "MCP local: down") {
		t.Errorf("status after a crash: %q", lines)
	}
	if st := c.States(key); !strings.Contains(st[1].Err, "crashing on purpose") {
		t.Errorf("the crash's error does not carry the server's last words: %+v", st)
	}
	waitUp(t, c, key, call)
	if st := c.States(key); st[1].Restarts < 3 {
		t.Errorf("restarts %d, want at least 3", st[1].Restarts)
	}

	// The conversation's end ends the server.
	if err := c.Release(ctx, key); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for countServers(t, sb) != "0" {
		if time.Now().After(deadline) {
			t.Fatalf("the server still runs after Release")
		}
		time.Sleep(100 * time.Millisecond)
	}

	// A server without calls for IdleStop ends (a running server keeps its
	// sandbox busy, so it would never be stopped as idle) and starts again,
	// at once and not as a restart, on the next call.
	quiet, err := New(Options{
		Servers:  []Server{{Name: "quiet", Argv: []string{"/workspace/.mcp/mcptestserver"}, Timeout: 20 * time.Second}},
		IdleStop: 700 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer quiet.Close()
	echo := func() {
		t.Helper()
		tool := toolsByName(quiet.Tools(ctx, env))["mcp__quiet__echo"]
		if tool == nil {
			t.Fatalf("no echo tool; states %+v", quiet.States(key))
		}
		if out, err := tool.Run(ctx, env, []byte(`{"text":"hi"}`)); err != nil || out.Content != "echo: hi" {
			t.Fatalf("echo: %+v %v", out, err)
		}
	}
	echo()
	if n := countServers(t, sb); n != "1" {
		t.Fatalf("%s servers after a call, want 1", n)
	}
	deadline = time.Now().Add(15 * time.Second)
	for countServers(t, sb) != "0" {
		if time.Now().After(deadline) {
			t.Fatalf("the idle server still runs; states %+v", quiet.States(key))
		}
		time.Sleep(100 * time.Millisecond)
	}
	echo()
	if st := quiet.States(key); len(st) != 1 || st[0].Restarts != 0 || st[0].Err != "" {
		t.Errorf("after an idle stop and a new call: %+v, want no restart and no error", st)
	}
}

// waitUp calls echo until the server answers again (after its backoff).
func waitUp(t *testing.T, c *Client, key conch.ConversationKey, call func(string, string) conch.ToolOutput) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out := call("mcp__local__echo", `{"text":"up?"}`)
		if out.Content == "echo: up?" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not come back: %+v; states %+v", out, c.States(key))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
