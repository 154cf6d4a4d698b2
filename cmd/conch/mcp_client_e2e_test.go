package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"conch/internal/testenv/fakellm"
	"conch/internal/testenv/mcpserver"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpTestServer serves the Go SDK test server over streamable HTTP behind
// a bearer token.
func mcpTestServer(t *testing.T, token string) string {
	t.Helper()
	s := mcpserver.New(mcpserver.Options{})
	h := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return s }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestChatMCPTools: through the real `conch chat` and its SQLite store, the
// model is offered a remote MCP server's tools (a Go SDK server over
// streamable HTTP, its token from a key file), calls one and answers with
// the result; an isError result is read, not a crashed turn; a dead server
// shows on /status; every call is audited without the token; the operator
// commands list, show and test the server.
func TestChatMCPTools(t *testing.T) {
	const token = "mcp-token-0123456789abcdef"
	url := mcpTestServer(t, token)
	srv := fakellm.New(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "docs-token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := `[[mcp.servers]]
name = "docs"
url = "` + url + `/mcp"
token_file = "` + tokenFile + `"
allow_private = true
timeout = "5s"
exclude = ["slow"]

[[mcp.servers]]
name = "dead"
url = "http://` + closedAddr(t) + `/mcp"
allow_private = true
timeout = "2s"
`
	if err := os.MkdirAll(filepath.Join(dir, "config", "conch"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config", "conch", "conch.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	env := testEnv(srv, fakellm.OpenAI, dir)

	srv.Push(
		fakellm.ToolCall("mcp__docs__echo", `{"text":"hello over MCP"}`),
		fakellm.ToolCall("mcp__docs__fail", `{}`),
		fakellm.Text("The docs server said hello."),
	)
	p := startConch(t, env, "chat")
	if got := p.sayWithin(t, "ask the docs server", time.Minute); got != "The docs server said hello." {
		t.Fatalf("reply %q; stderr:\n%s", got, p.stderr)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	var names []string
	for _, tl := range reqs[0].Tools {
		names = append(names, tl.Name)
	}
	for _, want := range []string{"mcp__docs__echo", "mcp__docs__bash", "mcp_read_resource", "mcp_get_prompt", "remember"} {
		if !slices.Contains(names, want) {
			t.Errorf("tool %s not offered: %v", want, names)
		}
	}
	if !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "mcp__docs__lookup_v2_") }) {
		t.Errorf("the tool lookup.v2 is not offered under a cleaned name: %v", names)
	}
	if slices.Contains(names, "mcp__docs__slow") || slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "mcp__dead__") }) {
		t.Errorf("an excluded tool or a dead server's tool is offered: %v", names)
	}
	if rs := reqs[1].ToolResults(); len(rs) == 0 || rs[len(rs)-1].Content != "echo: hello over MCP" {
		t.Errorf("the model did not get the MCP result: %+v", rs)
	}
	if rs := reqs[2].ToolResults(); len(rs) == 0 || !strings.Contains(rs[len(rs)-1].Content, "frobnicator") {
		t.Errorf("the isError result did not reach the model: %+v", rs)
	}

	if _, err := p.stdin.Write([]byte("/status\n")); err != nil {
		t.Fatal(err)
	}
	p.waitStderr(t, "MCP dead: down")
	p.waitStderr(t, "MCP docs: ready")
	p.finish(t)

	audit, err := os.ReadFile(filepath.Join(dir, "data", "logs", "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(audit), `"mcp_client_call"`); n != 2 {
		t.Errorf("%d mcp_client_call audit events, want 2:\n%s", n, audit)
	}
	if !strings.Contains(string(audit), `"tool":"fail"`) || strings.Contains(string(audit), token) {
		t.Errorf("audit lacks the failed call or holds the token:\n%s", audit)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "data", "logs", "*.log"))
	for _, l := range logs {
		if b, _ := os.ReadFile(l); strings.Contains(string(b), token) {
			t.Errorf("%s holds the token", l)
		}
	}

	out, _, code := conchRun(t, env, "mcp list")
	if code != 0 || !strings.Contains(out, "docs") || !strings.Contains(out, "ready") || !strings.Contains(out, "down") {
		t.Errorf("mcp list (exit %d):\n%s", code, out)
	}
	out, _, code = conchRun(t, env, "mcp tools docs")
	if code != 0 || !strings.Contains(out, "mcp__docs__echo") || strings.Contains(out, "mcp__docs__slow") {
		t.Errorf("mcp tools (exit %d):\n%s", code, out)
	}
	out, _, code = conchRun(t, env, "mcp test docs")
	if code != 0 || !strings.Contains(out, "MCP server docs answers") {
		t.Errorf("mcp test (exit %d):\n%s", code, out)
	}
	_, errOut, code := conchRun(t, env, "mcp test dead")
	if code == 0 || !strings.Contains(errOut, "dead") {
		t.Errorf("mcp test of a dead server (exit %d): %s", code, errOut)
	}
	out, _, _ = conchRun(t, env, "doctor")
	if !strings.Contains(out, "✓ mcp docs: answers") || !strings.Contains(out, "✗ mcp dead") {
		t.Errorf("doctor:\n%s", out)
	}
}
