package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"conch"
	"conch/internal/testenv/mcpserver"
	"conch/netpolicy"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// audits collects audit events.
type audits struct {
	mu sync.Mutex
	ev []conch.AuditEvent
}

func (a *audits) Audit(_ context.Context, e conch.AuditEvent) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ev = append(a.ev, e)
	return nil
}

func (a *audits) all() []conch.AuditEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]conch.AuditEvent(nil), a.ev...)
}

var loopback = netpolicy.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}

// serveHTTP serves the test server over streamable HTTP (or SSE), behind a
// bearer token when token is set.
func serveHTTP(t *testing.T, sse bool, token string) *httptest.Server {
	t.Helper()
	ts, _ := serveHTTPServer(t, sse, token)
	return ts
}

// serveHTTPServer is serveHTTP that also returns the MCP server.
func serveHTTPServer(t *testing.T, sse bool, token string) (*httptest.Server, *mcpsdk.Server) {
	t.Helper()
	srv := mcpserver.New(mcpserver.Options{})
	var h http.Handler = mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil)
	if sse {
		h = mcpsdk.NewSSEHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil)
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if sse && r.Method == http.MethodPost && r.URL.Query().Get("sessionid") == "" {
			// An old SSE-only server refuses the streamable POST.
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts, srv
}

func newClient(t *testing.T, a *audits, servers ...Server) *Client {
	t.Helper()
	o := Options{Servers: servers, MaxResultChars: 1000}
	if a != nil {
		o.Audit = a
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var key = conch.ConversationKey{Channel: "cli", ID: "local"}

func toolsByName(ts []conch.Tool) map[string]conch.Tool {
	m := map[string]conch.Tool{}
	for _, t := range ts {
		m[t.Spec().Name] = t
	}
	return m
}

func run(t *testing.T, tool conch.Tool, args string) conch.ToolOutput {
	t.Helper()
	if tool == nil {
		t.Fatal("no such tool")
	}
	out, err := tool.Run(context.Background(), conch.ToolEnv{Conversation: key}, json.RawMessage(args))
	if err != nil {
		t.Fatalf("%s: Go error %v (a server's failure must be a result the model reads)", tool.Spec().Name, err)
	}
	return out
}

func TestRemoteServer(t *testing.T) {
	ts := serveHTTP(t, false, "s3cret-token")
	a := &audits{}
	c := newClient(t, a, Server{Name: "docs", URL: ts.URL, Token: "s3cret-token", Policy: loopback, Timeout: 2 * time.Second, Exclude: []string{"net"}})
	tools := toolsByName(c.Tools(context.Background(), conch.ToolEnv{Conversation: key}))
	for _, want := range []string{"mcp__docs__echo", "mcp__docs__bash", ToolName("docs", "lookup.v2"), ResourceToolName, PromptToolName} {
		if tools[want] == nil {
			t.Errorf("tool %s not offered; have %v", want, keys(tools))
		}
	}
	if tools["mcp__docs__net"] != nil {
		t.Error("an excluded tool is offered")
	}
	if spec := tools[ToolName("docs", "lookup.v2")].Spec(); strings.Contains(string(spec.Parameters), "$ref") || !strings.Contains(spec.Description, "lookup.v2") {
		t.Errorf("spec not cleaned or not described: %+v", spec)
	}

	if out := run(t, tools["mcp__docs__echo"], `{"text":"hi"}`); out.IsError || out.Content != "echo: hi" {
		t.Errorf("echo: %+v", out)
	}
	if out := run(t, tools["mcp__docs__stats"], `{}`); !strings.Contains(out.Content, `"lines":42`) {
		t.Errorf("structured content: %+v", out)
	}
	out := run(t, tools["mcp__docs__picture"], `{}`)
	if len(out.Images) != 1 || out.Images[0].MediaType != "image/png" || string(out.Images[0].Data) != string(mcpserver.PNG) {
		t.Errorf("image not mapped: %+v", out)
	}
	for _, want := range []string{"here is a dot", "[image image/png", "resource conch://notes/dot (text/plain):\na dot, 1x1", "resource link: conch://notes/hello (hello)"} {
		if !strings.Contains(out.Content, want) {
			t.Errorf("picture result lacks %q: %q", want, out.Content)
		}
	}
	if out := run(t, tools["mcp__docs__fail"], `{}`); !out.IsError || !strings.Contains(out.Content, "frobnicator") {
		t.Errorf("isError not passed on: %+v", out)
	}
	if out := run(t, tools["mcp__docs__huge"], `{"bytes":50000}`); len(out.Content) > 1100 || !strings.Contains(out.Content, "[result cut: 1000 of 50000") {
		t.Errorf("huge result not cut: %d chars, %q", len(out.Content), out.Content[len(out.Content)-60:])
	}
	start := time.Now()
	if out := run(t, tools["mcp__docs__slow"], `{"seconds":30}`); !out.IsError || !strings.Contains(out.Content, "no answer within 2s") {
		t.Errorf("slow call: %+v", out)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("the timeout did not end the slow call")
	}
	if out := run(t, tools["mcp__docs__echo"], `{"text":"still up"}`); out.Content != "echo: still up" {
		t.Errorf("after a timeout: %+v", out)
	}
	if out := run(t, tools["mcp__docs__bash"], `{"command":"ls"}`); out.Content != "the server's own bash ran" {
		t.Errorf("server bash: %+v", out)
	}
	if out := run(t, tools[ResourceToolName], `{"server":"docs","uri":"conch://notes/hello"}`); !strings.Contains(out.Content, "hello from a resource") {
		t.Errorf("resource: %+v", out)
	}
	if !strings.Contains(tools[ResourceToolName].Spec().Description, "docs conch://notes/hello") {
		t.Errorf("resource tool does not list the resource: %s", tools[ResourceToolName].Spec().Description)
	}
	if out := run(t, tools[PromptToolName], `{"server":"docs","name":"review","arguments":{"topic":"the plan"}}`); !strings.Contains(out.Content, "Please review the plan") {
		t.Errorf("prompt: %+v", out)
	}
	if out := run(t, tools[ResourceToolName], `{"server":"docs","uri":"conch://nope"}`); !out.IsError {
		t.Errorf("a missing resource is not an error: %+v", out)
	}
	if out := run(t, tools["mcp__docs__echo"], `[1]`); !out.IsError {
		t.Errorf("bad arguments are not an error: %+v", out)
	}

	ev := a.all()
	if len(ev) < 10 {
		t.Fatalf("%d audit events, want one per call", len(ev))
	}
	for _, e := range ev {
		if e.Kind != conch.AuditMCPClientCall || e.Conversation != key || strings.Contains(string(e.Detail), "s3cret") {
			t.Errorf("audit event %+v %s", e, e.Detail)
		}
	}
	if !strings.Contains(string(ev[0].Detail), `"server":"docs","tool":"echo"`) {
		t.Errorf("audit detail %s lacks server and tool", ev[0].Detail)
	}
	if lines := c.Status(context.Background(), key); len(lines) != 1 || !strings.Contains(lines[0], "MCP docs: ready") {
		t.Errorf("status %q", lines)
	}
	if ov := c.Overview(); len(ov) != 1 || ov[0].Ready != 1 || ov[0].Kind != "remote" || ov[0].Tools < 8 {
		t.Errorf("overview %+v", ov)
	}
}

func keys(m map[string]conch.Tool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestRemoteSSEFallback(t *testing.T) {
	ts := serveHTTP(t, true, "")
	c := newClient(t, nil, Server{Name: "old", URL: ts.URL, Policy: loopback})
	tools := toolsByName(c.Tools(context.Background(), conch.ToolEnv{Conversation: key}))
	if out := run(t, tools["mcp__old__echo"], `{"text":"over sse"}`); out.Content != "echo: over sse" {
		t.Fatalf("SSE fallback: %+v (tools %v)", out, keys(tools))
	}
}

// TestRemoteRefused: a server at a private address is refused at connect
// time unless the operator allowed it; a bad token is a clear error; a
// server limited to a channel is not offered elsewhere. Nothing crashes.
func TestRemoteRefused(t *testing.T) {
	ts := serveHTTP(t, false, "right")
	c := newClient(t, nil,
		Server{Name: "private", URL: ts.URL},
		Server{Name: "badtoken", URL: ts.URL, Token: "wrong", Policy: loopback},
		Server{Name: "tgonly", URL: ts.URL, Token: "right", Policy: loopback, Channels: []conch.ChannelName{"telegram"}},
	)
	if tools := c.Tools(context.Background(), conch.ToolEnv{Conversation: key}); len(tools) != 0 {
		t.Fatalf("tools offered from refused servers: %v", toolsByName(tools))
	}
	st := c.States(key)
	if len(st) != 2 || st[0].Status != "down" || st[1].Status != "down" {
		t.Fatalf("states %+v", st)
	}
	if !strings.Contains(st[1].Err, "private") && !strings.Contains(st[1].Err, "loopback") {
		t.Errorf("private server's error does not say why: %q", st[1].Err)
	}
	if !strings.Contains(st[0].Err, "401") && !strings.Contains(strings.ToLower(st[0].Err), "unauthorized") {
		t.Errorf("bad token's error does not say so: %q", st[0].Err)
	}
	lines := c.Status(context.Background(), key)
	if len(lines) != 2 || !strings.Contains(lines[0], "down") || !strings.Contains(lines[0], "restarting") {
		t.Errorf("status %q", lines)
	}
	if ov := c.Overview(); len(ov) != 3 || ov[0].Down != 1 || ov[0].LastError == "" || ov[2].Down != 0 {
		t.Errorf("overview %+v", ov)
	}
	tg := conch.ConversationKey{Channel: "telegram", ID: "1"}
	if tools := toolsByName(c.Tools(context.Background(), conch.ToolEnv{Conversation: tg})); tools["mcp__tgonly__echo"] == nil {
		t.Errorf("telegram conversation not offered its server: %v", keys(tools))
	}
	// A call to a down server is a result, and says when it is tried again.
	st2 := &serverTool{c: c, srv: c.server("private"), tool: &mcpsdk.Tool{Name: "echo"}}
	if out := run(t, st2, `{}`); !out.IsError || !strings.Contains(out.Content, "down") {
		t.Errorf("call to a down server: %+v", out)
	}
}

// TestToolListChanged: a tool the server adds while connected is offered
// from the next turn on (notifications/tools/list_changed).
func TestToolListChanged(t *testing.T) {
	ts, srv := serveHTTPServer(t, false, "")
	c := newClient(t, nil, Server{Name: "live", URL: ts.URL, Policy: loopback})
	env := conch.ToolEnv{Conversation: key}
	if tools := toolsByName(c.Tools(context.Background(), env)); tools["mcp__live__echo"] == nil || tools["mcp__live__late"] != nil {
		t.Fatalf("tools %v", keys(tools))
	}
	srv.AddTool(&mcpsdk.Tool{Name: "late", Description: "Added later.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "late but here"}}}, nil
		})
	deadline := time.Now().Add(10 * time.Second)
	for {
		tools := toolsByName(c.Tools(context.Background(), env))
		if tool := tools["mcp__live__late"]; tool != nil {
			if out := run(t, tool, `{}`); out.Content != "late but here" {
				t.Errorf("late tool: %+v", out)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the added tool never appeared: %v", keys(tools))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
