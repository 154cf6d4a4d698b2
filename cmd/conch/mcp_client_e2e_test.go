package main

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"conch/internal/testenv"
	"conch/internal/testenv/engine"
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

// pyServer is a minimal stdio MCP server in the sandbox image's python3:
// it answers with its pid and working directory.
const pyServer = `import json, os, sys
def send(m):
    sys.stdout.write(json.dumps(m) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    m = json.loads(line)
    mid, meth = m.get("id"), m.get("method")
    if mid is None:
        continue
    if meth == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": {"name": "py", "version": "1"}}})
    elif meth == "tools/list":
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": [
            {"name": "whereami", "description": "Where the server runs.", "inputSchema": {"type": "object", "properties": {}}},
            {"name": "whoami", "description": "Asks the API who we are.", "inputSchema": {"type": "object", "properties": {}}}]}})
    elif meth == "tools/call" and m["params"]["name"] == "whoami":
        import urllib.request
        req = urllib.request.Request(os.environ["API_URL"] + "/whoami", headers={"Authorization": "Bearer " + os.environ["API_TOKEN"]})
        try:
            body = urllib.request.urlopen(req, timeout=10).read().decode()
        except Exception as e:
            body = "failed: %s" % e
        send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": body}]}})
    elif meth == "tools/call":
        send({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": "pid %d in %s as uid %d" % (os.getpid(), os.getcwd(), os.getuid())}]}})
    elif meth == "ping":
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "no such method"}})
`

// TestChatMCPStdioInSandbox: through the real `conch chat` with a real
// sandbox, a stdio MCP server runs inside the conversation's sandbox (its
// working directory is the workspace), started on first use and kept
// across turns (the same process answers both).
func TestChatMCPStdioInSandbox(t *testing.T) {
	testenv.Short(t)
	e := engine.Docker(t)
	srv := fakellm.New(t)
	dir := t.TempDir()
	buf := make([]byte, 4)
	_, _ = rand.Read(buf)
	instance := "mc" + hex.EncodeToString(buf)
	env := append(testEnv(srv, fakellm.OpenAI, dir), engineEnv(t, e, instance)...)
	instanceContainers(t, e.Client(t), instance)
	const secret = "api-secret-for-the-py-server-42"
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+secret {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		w.Write([]byte("you are the py server"))
	}))
	defer upstream.Close()
	secretFile := filepath.Join(dir, "api-secret")
	if err := os.WriteFile(secretFile, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := "[[mcp.servers]]\nname = \"py\"\ncommand = \"python3\"\nargs = [\"-u\", \"-c\", '''\n" + pyServer + "''']\ntimeout = \"30s\"\n" +
		"egress_url = \"" + upstream.URL + "\"\negress_url_env = \"API_URL\"\negress_secret_env = \"API_TOKEN\"\negress_secret_file = \"" + secretFile + "\"\n"
	if err := os.MkdirAll(filepath.Join(dir, "config", "conch"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config", "conch", "conch.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	srv.Push(fakellm.ToolCall("mcp__py__whereami", `{}`), fakellm.Text("First."))
	p := startConch(t, env, "chat")
	if got := p.sayWithin(t, "where does the server run?", 2*time.Minute); got != "First." {
		t.Fatalf("reply %q; stderr:\n%s", got, p.stderr)
	}
	first := lastToolResult(t, srv)
	if !strings.Contains(first, " in /workspace as uid ") || strings.Contains(first, "as uid 0") {
		t.Fatalf("the server does not run in the sandbox as its user: %q", first)
	}
	srv.Push(fakellm.ToolCall("mcp__py__whereami", `{}`), fakellm.Text("Second."))
	if got := p.sayWithin(t, "and now?", time.Minute); got != "Second." {
		t.Fatalf("reply %q", got)
	}
	if second := lastToolResult(t, srv); second != first {
		t.Errorf("another process answered the second turn: %q, then %q", first, second)
	}
	srv.Push(fakellm.ToolCall("mcp__py__whoami", `{}`), fakellm.Text("Third."))
	if got := p.sayWithin(t, "who are we to the API?", time.Minute); got != "Third." {
		t.Fatalf("reply %q", got)
	}
	if res := lastToolResult(t, srv); res != "you are the py server" {
		t.Errorf("the API through conch's egress said %q", res)
	}
	p.finish(t)
}

// TestMCPLogin: `conch mcp login` signs conch in to a server behind OAuth
// 2.1 (the address it prints is followed as a browser would, back to its
// loopback listener); then `conch mcp test` and a turn of `conch chat` use
// the kept sign-in.
func TestMCPLogin(t *testing.T) {
	as := mcpserver.NewOAuth(t)
	srv := fakellm.New(t)
	dir := t.TempDir()
	cfg := "[[mcp.servers]]\nname = \"corp\"\nurl = \"" + as.URL + "/mcp\"\noauth = true\nallow_private = true\n"
	if err := os.MkdirAll(filepath.Join(dir, "config", "conch"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config", "conch", "conch.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	env := testEnv(srv, fakellm.OpenAI, dir)
	if _, errOut, code := conchRun(t, env, "mcp test corp"); code == 0 || !strings.Contains(errOut, "conch mcp login corp") {
		t.Fatalf("mcp test before the sign-in (exit %d): %s", code, errOut)
	}

	port := strings.Split(closedAddr(t), ":")[1]
	p := startConch(t, env, "mcp login corp --port "+port)
	line := p.readLine(t)
	if !strings.HasPrefix(line, "Open this address") {
		t.Fatalf("login said %q", line)
	}
	authURL := p.readLine(t)
	resp, err := http.Get(authURL) // the browser: authorize, then back to conch's listener
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "signed in") {
		t.Errorf("callback page %q", page)
	}
	if done := p.readLine(t); !strings.HasPrefix(done, "Signed in to corp") {
		t.Fatalf("login ended with %q; stderr %s", done, p.stderr)
	}
	p.finish(t)
	if fi, err := os.Stat(filepath.Join(dir, "data", "mcp-oauth", "corp.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("kept sign-in: %v %v", fi, err)
	}

	if out, errOut, code := conchRun(t, env, "mcp test corp"); code != 0 || !strings.Contains(out, "answers") {
		t.Fatalf("mcp test after the sign-in (exit %d): %s %s", code, out, errOut)
	}
	srv.Push(fakellm.ToolCall("mcp__corp__echo", `{"text":"with OAuth"}`), fakellm.Text("Done."))
	c := startConch(t, env, "chat")
	if got := c.say(t, "use corp"); got != "Done." {
		t.Fatalf("reply %q", got)
	}
	c.finish(t)
	if res := lastToolResult(t, srv); res != "echo: with OAuth" {
		t.Errorf("the tool through the OAuth sign-in said %q", res)
	}
}

// TestChatMCPReferenceServer: through the real `conch chat` with a real
// sandbox, the reference "everything" server from the npm registry, pinned
// by its lockfile, is built into the derived sandbox image and answers the
// model's call from inside the conversation's sandbox.
func TestChatMCPReferenceServer(t *testing.T) {
	testenv.Short(t)
	e := engine.Docker(t)
	srv := fakellm.New(t)
	dir := t.TempDir()
	buf := make([]byte, 4)
	_, _ = rand.Read(buf)
	instance := "mr" + hex.EncodeToString(buf)
	env := append(testEnv(srv, fakellm.OpenAI, dir), engineEnv(t, e, instance)...)
	instanceContainers(t, e.Client(t), instance)
	lock, err := filepath.Abs("../../mcp/testdata/server-everything.lock.json")
	if err != nil {
		t.Fatal(err)
	}
	cfg := "[[mcp.servers]]\nname = \"everything\"\npackage = \"@modelcontextprotocol/server-everything@2026.8.31\"\npackage_lock = \"" + lock + "\"\nargs = [\"stdio\"]\ninclude = [\"echo\", \"get-sum\"]\n"
	if err := os.MkdirAll(filepath.Join(dir, "config", "conch"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config", "conch", "conch.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	srv.Push(fakellm.ToolCall("mcp__everything__get-sum", `{"a":19,"b":23}`), fakellm.Text("Summed."))
	p := startConch(t, env, "chat")
	if got := p.sayWithin(t, "add 19 and 23 with the everything server", 4*time.Minute); got != "Summed." {
		t.Fatalf("reply %q; stderr:\n%s", got, p.stderr)
	}
	p.finish(t)
	if res := lastToolResult(t, srv); !strings.Contains(res, "42") {
		t.Errorf("get-sum said %q", res)
	}
	var names []string
	for _, tl := range srv.Requests()[0].Tools {
		if strings.HasPrefix(tl.Name, "mcp__") {
			names = append(names, tl.Name)
		}
	}
	if !slices.Equal(names, []string{"mcp__everything__echo", "mcp__everything__get-sum"}) {
		t.Errorf("MCP tools offered %v, want the two included", names)
	}
}
