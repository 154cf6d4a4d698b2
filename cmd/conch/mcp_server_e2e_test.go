package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"conch"
	"conch/internal/testenv"
	"conch/internal/testenv/engine"
	"conch/internal/testenv/fakellm"
	"conch/internal/testenv/mcpinspector"
)

// bearer adds a bearer token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpConnect opens an MCP session with the Go SDK's client.
func mcpConnect(t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "conch-e2e", Version: "1"}, nil)
	s, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token}}}, nil)
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// callText calls a tool and returns its text and whether it is an error.
func callText(t *testing.T, s *mcp.ClientSession, name string, args any) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

// mustCall is callText that fails the test on a tool error.
func mustCall(t *testing.T, s *mcp.ClientSession, name string, args any) string {
	t.Helper()
	text, isErr := callText(t, s, name, args)
	if isErr {
		t.Fatalf("%s failed: %s", name, text)
	}
	return text
}

// issue runs `conch mcp token` and returns the token.
func issue(t *testing.T, env []string, args string) string {
	t.Helper()
	out, errOut, code := conchRun(t, env, "mcp token "+args)
	if code != 0 {
		t.Fatalf("conch mcp token %s: exit %d\n%s", args, code, errOut)
	}
	tok := strings.TrimSpace(out)
	if !strings.HasPrefix(tok, "conch_mcp_") || strings.Contains(tok, "\n") {
		t.Fatalf("conch mcp token printed %q, want one token", out)
	}
	return tok
}

// bridgeConnect starts `conch mcp serve` with args as a stdio MCP server
// and connects the Go SDK's client to it, within 30 s.
func bridgeConnect(t *testing.T, env []string, args string) (*mcp.ClientSession, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(env, "CONCH_TEST_ARGS="+args)
	stderr := &testenv.SyncBuffer{}
	cmd.Stderr = stderr
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("conch %s stderr:\n%s", args, stderr)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "conch-e2e-stdio", Version: "1"}, nil)
	return c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
}

// bridgeSession is bridgeConnect that must succeed.
func bridgeSession(t *testing.T, env []string, args string) *mcp.ClientSession {
	t.Helper()
	s, err := bridgeConnect(t, env, args)
	if err != nil {
		t.Fatalf("connect through `conch %s`: %v", args, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestMCPServer drives conch's MCP server end to end: the real conch up with
// the SQLite store and Docker, two sessions of the Go SDK's client on one
// token (a command, files, and one terminal seen from both), a token of
// another conversation that sees another computer, bad tokens (401, logged,
// conch stays up), the MCP Inspector CLI from the npm registry, the stdio
// bridge `conch mcp serve`, the audit trail and revocation.
func TestMCPServer(t *testing.T) {
	testenv.Short(t)
	e := engine.Docker(t)
	insp := mcpinspector.Get(t)
	srv := fakellm.New(t)
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	buf := make([]byte, 4)
	rand.Read(buf)
	instance := "mcp" + hex.EncodeToString(buf)
	addr := freeAddr(t)
	env := append(testEnv(srv, fakellm.OpenAI, dir), "CONCH_GATEWAY_LISTEN="+addr, "CONCH_WEB_ENABLED=false")
	env = append(env, engineEnv(t, e, instance)...)
	containers := instanceContainers(t, e.Client(t), instance)
	work := conch.ConversationKey{Channel: conch.ChannelCLI, ID: "work"}
	other := conch.ConversationKey{Channel: conch.ChannelCLI, ID: "other"}
	seedConversation(t, dataDir, work)
	seedConversation(t, dataDir, other)

	if _, errOut, code := conchRun(t, env, "mcp token cli:nobody"); code == 0 || !strings.Contains(errOut, "not known") {
		t.Fatalf("a token for an unknown conversation: exit %d, stderr %q; want a refusal naming it", code, errOut)
	}
	tok := issue(t, env, "cli:work --label laptop")
	otherTok := issue(t, env, "cli:other --expires 1h")

	p := startConch(t, env, "up")
	p.waitStderr(t, "mcp server")
	url := "http://" + addr + "/mcp"

	// Two sessions on one token: the same computer and terminals.
	a := mcpConnect(t, url, tok)
	tools, err := a.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	for _, want := range []string{"bash", "read_file", "write_file", "list_files", "terminal_open", "terminal_type", "terminal_wait", "terminal_read", "terminal_close"} {
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+want+" ") {
			t.Errorf("tools %v lack %s", names, want)
		}
	}
	mustCall(t, a, "write_file", map[string]any{"path": "notes/hello.txt", "content": "written over MCP\n"})
	if got := mustCall(t, a, "bash", map[string]any{"command": "cat notes/hello.txt"}); !strings.Contains(got, "written over MCP") || !strings.Contains(got, "exit code 0") {
		t.Fatalf("bash cat: %q", got)
	}
	if got := mustCall(t, a, "read_file", map[string]any{"path": "/workspace/notes/hello.txt"}); got != "written over MCP\n" {
		t.Fatalf("read_file: %q", got)
	}
	if got, isErr := callText(t, a, "bash", map[string]any{"command": "false"}); !isErr || !strings.Contains(got, "exit code 1") {
		t.Fatalf("a failing command: %q (error %v), want an error result with its exit code", got, isErr)
	}
	if got := mustCall(t, a, "terminal_open", map[string]any{}); !strings.Contains(got, "Opened terminal 0") {
		t.Fatalf("terminal_open: %q", got)
	}
	mustCall(t, a, "terminal_wait", map[string]any{"timeout_seconds": 10})
	mustCall(t, a, "terminal_type", map[string]any{"tty": 0, "expect": "bash", "text": "echo shared-$((6*7))"})

	b := mcpConnect(t, url, tok)
	// Observe before act, across sessions: b has not seen a's command.
	if got, isErr := callText(t, b, "terminal_type", map[string]any{"tty": 0, "expect": "bash", "text": "echo too-soon"}); !isErr || !strings.Contains(got, "not seen") {
		t.Fatalf("typing before observing: %q (error %v), want a refusal", got, isErr)
	}
	if got := mustCall(t, b, "terminal_wait", map[string]any{"timeout_seconds": 30}); !strings.Contains(got, "shared-42") || !strings.Contains(got, "done, exit 0") {
		t.Fatalf("terminal_wait in the second session: %q", got)
	}
	if got := mustCall(t, b, "terminal_read", map[string]any{"tty": 0}); !strings.Contains(got, "shared-42") {
		t.Fatalf("terminal_read: %q", got)
	}
	if got := mustCall(t, a, "terminal_read", map[string]any{"tty": 0, "history": 50}); !strings.Contains(got, "echo shared-$((6*7))") {
		t.Fatalf("terminal_read in the first session: %q", got)
	}
	if got, isErr := callText(t, a, "terminal_read", map[string]any{"tty": 7}); !isErr || !strings.Contains(got, "not open") {
		t.Fatalf("terminal_read of a closed terminal: %q (error %v)", got, isErr)
	}

	// Another conversation's token opens another computer.
	o := mcpConnect(t, url, otherTok)
	if got, isErr := callText(t, o, "read_file", map[string]any{"path": "notes/hello.txt"}); !isErr {
		t.Fatalf("the other conversation read the first one's file: %q", got)
	}
	if got := mustCall(t, o, "terminal_wait", map[string]any{"timeout_seconds": 1}); !strings.Contains(got, "no terminals are open") {
		t.Fatalf("the other conversation's terminals: %q", got)
	}
	if n := len(containers()); n != 2 {
		t.Fatalf("got %d sandboxes, want one per conversation (2)", n)
	}

	// Bad tokens: 401 and a log line; conch stays up.
	for _, h := range []string{"", "Bearer nonsense", "Bearer conch_mcp_000000000000_" + strings.Repeat("A", 43), "Bearer " + tok + "x"} {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if h != "" {
			req.Header.Set("Authorization", h)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("Authorization %q: got %d, want 401", h, resp.StatusCode)
		}
	}
	p.waitStderr(t, "mcp: request refused")
	if strings.Contains(p.stderr.String(), strings.TrimPrefix(tok, "conch_mcp_")[13:]) {
		t.Error("a token's secret reached the log")
	}

	// A real MCP client from the npm registry: the MCP Inspector CLI.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	hdr := "Authorization: Bearer " + tok
	out, err := insp.Run(ctx, url, "--transport", "http", "--header", hdr, "--method", "tools/list")
	if err != nil || !strings.Contains(out, `"terminal_wait"`) {
		t.Fatalf("inspector tools/list: %v\n%s", err, out)
	}
	out, err = insp.Run(ctx, url, "--transport", "http", "--header", hdr, "--method", "tools/call", "--tool-name", "bash", "--tool-arg", "command=cat notes/hello.txt")
	if err != nil || !strings.Contains(out, "written over MCP") {
		t.Fatalf("inspector tools/call bash: %v\n%s", err, out)
	}
	out, err = insp.Run(ctx, url, "--transport", "http", "--header", hdr, "--method", "tools/call", "--tool-name", "terminal_read", "--tool-arg", "tty=0")
	if err != nil || !strings.Contains(out, "shared-42") {
		t.Fatalf("inspector tools/call terminal_read: %v\n%s", err, out)
	}
	if _, err := insp.Run(ctx, url, "--transport", "http", "--header", "Authorization: Bearer nonsense", "--method", "tools/list"); err == nil {
		t.Fatal("the inspector got through with a bad token")
	}

	// The stdio bridge, as Claude Desktop would start it.
	bs := bridgeSession(t, env, "mcp serve --conversation cli:work")
	if got := mustCall(t, bs, "bash", map[string]any{"command": "cat notes/hello.txt"}); !strings.Contains(got, "written over MCP") {
		t.Fatalf("bash through the bridge: %q", got)
	}
	listed, _, _ := conchRun(t, env, "mcp tokens")
	if !strings.Contains(listed, "conch mcp serve (pid") || !strings.Contains(listed, "laptop") {
		t.Fatalf("conch mcp tokens while the bridge runs:\n%s", listed)
	}
	if err := bs.Close(); err != nil {
		t.Logf("close the bridge: %v", err)
	}
	// The bridge as on a laptop: a URL and a file holding the token.
	tokFile := filepath.Join(dir, "mcp-token")
	if err := os.WriteFile(tokFile, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	laptop := bridgeSession(t, env, "mcp serve --url "+url+" --token-file "+tokFile)
	if got := mustCall(t, laptop, "read_file", map[string]any{"path": "notes/hello.txt"}); got != "written over MCP\n" {
		t.Fatalf("read_file through the token-file bridge: %q", got)
	}
	laptop.Close()
	listed, _, _ = conchRun(t, env, "mcp tokens --json")
	var rows []struct {
		ID, Conversation, Label string
		LastUsed                *time.Time `json:"last_used_at"`
	}
	if err := json.Unmarshal([]byte(listed), &rows); err != nil {
		t.Fatalf("conch mcp tokens --json: %v\n%s", err, listed)
	}
	if len(rows) != 2 {
		t.Fatalf("tokens after the bridge ended: %+v, want the two issued (the bridge's revoked)", rows)
	}
	var workID string
	for _, r := range rows {
		if r.Conversation == "cli:work" {
			workID = r.ID
			if r.LastUsed == nil {
				t.Error("the used token has no last use")
			}
		}
	}

	// Every call is audited, with the token's id and without its secret.
	audit, err := os.ReadFile(filepath.Join(dataDir, "logs", "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var calls int
	sc := bufio.NewScanner(strings.NewReader(string(audit)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, tok) {
			t.Fatal("a token reached the audit trail")
		}
		if strings.Contains(line, `"mcp_serve_call"`) && strings.Contains(line, `"terminal_type"`) && strings.Contains(line, workID) {
			calls++
		}
	}
	if calls < 2 || !strings.Contains(string(audit), `"mcp_token_issue"`) {
		t.Fatalf("audit trail: %d terminal_type calls of token %s, want 2 (and the issue):\n%s", calls, workID, audit)
	}

	// Revocation works at once: a call in flight is stopped (its program
	// killed), the next call of a live session is refused.
	type callResult struct {
		text  string
		isErr bool
		took  time.Duration
	}
	inFlight := make(chan callResult, 1)
	go func() {
		start := time.Now()
		res, err := a.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "sh -c 'touch started; sleep 90'"}})
		r := callResult{took: time.Since(start), isErr: true}
		if err != nil {
			r.text = err.Error()
		} else if len(res.Content) > 0 {
			r.text, r.isErr = res.Content[0].(*mcp.TextContent).Text, res.IsError
		}
		inFlight <- r
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, isErr := callText(t, b, "read_file", map[string]any{"path": "started"}); !isErr {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the long command never started")
		}
	}
	if out, errOut, code := conchRun(t, env, "mcp token revoke "+workID); code != 0 || !strings.Contains(out, "Revoked") {
		t.Fatalf("revoke: exit %d\n%s%s", code, out, errOut)
	}
	select {
	case r := <-inFlight:
		if !r.isErr || !strings.Contains(r.text, "revoked") || r.took > 60*time.Second {
			t.Fatalf("the call in flight at revocation: %q (error %v) after %s, want it stopped", r.text, r.isErr, r.took)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("a call in flight went on after its token was revoked")
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	if res, err := a.CallTool(cctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "true"}}); err == nil {
		t.Fatalf("a revoked token still works: %+v", res)
	}
	if _, err := bridgeConnect(t, env, "mcp serve --url "+url+" --token-file "+tokFile); err == nil {
		t.Fatal("the bridge got through with a revoked token")
	}
	if got := mustCall(t, o, "bash", map[string]any{"command": "true"}); !strings.Contains(got, "exit code 0") {
		t.Fatalf("the other token after revoking one: %q", got)
	}
	if _, _, code := conchRun(t, env, "mcp token revoke "+workID); code == 0 {
		t.Error("revoking a revoked token succeeded")
	}
}
