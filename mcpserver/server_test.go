package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"conch"
)

// memTokens is an in-memory conch.MCPTokenStore.
type memTokens struct {
	mu sync.Mutex
	m  map[string]conch.MCPToken
}

var _ conch.MCPTokenStore = (*memTokens)(nil)

func (s *memTokens) CreateMCPToken(_ context.Context, t conch.MCPToken) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[t.ID] = t
	return nil
}

func (s *memTokens) MCPToken(_ context.Context, id string) (conch.MCPToken, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.m[id]
	return t, ok, nil
}

func (s *memTokens) MCPTokens(context.Context) ([]conch.MCPToken, error) { return nil, nil }

func (s *memTokens) RevokeMCPToken(_ context.Context, id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[id]
	delete(s.m, id)
	return ok, nil
}

func (s *memTokens) TouchMCPToken(_ context.Context, id string, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.m[id]
	t.LastUsed = now
	s.m[id] = t
	return nil
}

// sleepy runs until its call is stopped; started hears when it runs.
type sleepy struct{ started chan struct{} }

func (sleepy) Spec() conch.ToolSpec {
	return conch.ToolSpec{Name: "sleepy", Description: "d", Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (t sleepy) Run(ctx context.Context, _ conch.ToolEnv, _ json.RawMessage) (conch.ToolOutput, error) {
	t.started <- struct{}{}
	select {
	case <-ctx.Done():
		return conch.ToolOutput{}, ctx.Err()
	case <-time.After(time.Minute):
		return conch.ToolOK("slept"), nil
	}
}

// whoami answers with the conversation it runs in; "fail" makes it a Go error.
type whoami struct{}

func (whoami) Spec() conch.ToolSpec {
	return conch.ToolSpec{Name: "whoami", Description: "d", Parameters: json.RawMessage(`{"type":"object","properties":{"fail":{"type":"boolean"}}}`)}
}

func (whoami) Run(_ context.Context, env conch.ToolEnv, raw json.RawMessage) (conch.ToolOutput, error) {
	var a struct{ Fail bool }
	_ = json.Unmarshal(raw, &a)
	if a.Fail {
		return conch.ToolOutput{}, errors.New("engine gone; key sk-secret-123456")
	}
	return conch.ToolOK("in " + env.Conversation.String() + " with sk-secret-123456"), nil
}

type auditRec struct {
	mu  sync.Mutex
	evs []conch.AuditEvent
}

func (a *auditRec) Audit(_ context.Context, ev conch.AuditEvent) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.evs = append(a.evs, ev)
	return nil
}

type bearerRT struct{ tok string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}

func TestTokenForm(t *testing.T) {
	key := conch.ConversationKey{Channel: conch.ChannelCLI, ID: "x"}
	tok, rec, err := NewToken(key, "l", time.Now(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := TokenID(tok); !ok || id != rec.ID {
		t.Fatalf("TokenID(%q) = %q %v, want %q", tok, id, ok, rec.ID)
	}
	if rec.SecretHash != HashToken(tok) || strings.Contains(rec.SecretHash, tok) {
		t.Error("the record does not hold the token's hash")
	}
	tok2, _, _ := NewToken(key, "", time.Now(), time.Time{})
	if tok2 == tok {
		t.Error("two tokens are equal")
	}
	for _, bad := range []string{"", "conch_mcp_", "conch_mcp_abc_def", tok + "x", strings.Replace(tok, "conch_mcp_", "conch_xyz_", 1), "conch_mcp_zzzzzzzzzzzz_" + tok[len(tok)-43:]} {
		if _, ok := TokenID(bad); ok {
			t.Errorf("TokenID(%q) accepted it", bad)
		}
	}
	if _, _, err := NewToken(conch.ConversationKey{}, "", time.Now(), time.Time{}); err == nil {
		t.Error("a token without a conversation was made")
	}
}

// The route runs a tool in the conversation of the token presented, audits
// the call, redacts secrets, turns a Go error into an error result, and
// refuses missing, malformed, wrong, expired and revoked tokens with 401.
func TestServerTokens(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	store := &memTokens{m: map[string]conch.MCPToken{}}
	audit := &auditRec{}
	work := conch.ConversationKey{Channel: conch.ChannelCLI, ID: "work"}
	srv, err := New(Options{Tokens: store, Tools: []conch.Tool{whoami{}}, Audit: audit, Now: func() time.Time { return now },
		Redact: func(s string) string { return strings.ReplaceAll(s, "sk-secret-123456", "[redacted]") }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Tokens: store, Tools: []conch.Tool{whoami{}, whoami{}}}); err == nil {
		t.Error("a tool offered twice was accepted")
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	mk := func(key conch.ConversationKey, expires time.Time) (string, conch.MCPToken) {
		tok, rec, err := NewToken(key, "", now, expires)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.CreateMCPToken(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		return tok, rec
	}
	tok, rec := mk(work, time.Time{})
	expired, _ := mk(work, now.Add(-time.Second))
	ctx := context.Background()
	connect := func(tok string) (*mcp.ClientSession, error) {
		c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
		return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: &http.Client{Transport: bearerRT{tok}}}, nil)
	}
	s, err := connect(tok)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; res.IsError || got != "in cli:work with [redacted]" {
		t.Fatalf("whoami: %q (error %v)", got, res.IsError)
	}
	res, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{"fail": true}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; !res.IsError || strings.Contains(got, "sk-secret") || !strings.Contains(got, "engine gone") {
		t.Fatalf("a Go error: %q (error %v), want an error result without the secret", got, res.IsError)
	}
	audit.mu.Lock()
	if len(audit.evs) != 2 || audit.evs[0].Kind != conch.AuditMCPServeCall || audit.evs[0].Conversation != work ||
		!strings.Contains(string(audit.evs[0].Detail), `"token_id":"`+rec.ID+`"`) || strings.Contains(string(audit.evs[1].Detail), "sk-secret") {
		t.Errorf("audit: %+v", audit.evs)
	}
	audit.mu.Unlock()
	if got, _, _ := store.MCPToken(ctx, rec.ID); !got.LastUsed.Equal(now) {
		t.Errorf("last use: %v, want %v", got.LastUsed, now)
	}

	status := func(auth string) int {
		req, _ := http.NewRequest(http.MethodPost, hs.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	wrong := tok[:len(tok)-4] + "AAAA"
	if wrong == tok {
		wrong = tok[:len(tok)-4] + "BBBB"
	}
	for name, auth := range map[string]string{
		"none": "", "basic": "Basic dXNlcjpwYXNz", "malformed": "Bearer nonsense",
		"wrong secret": "Bearer " + wrong, "expired": "Bearer " + expired,
	} {
		if got := status(auth); got != http.StatusUnauthorized {
			t.Errorf("%s: got %d, want 401", name, got)
		}
	}
	if got := status("Bearer " + tok); got != http.StatusOK {
		t.Fatalf("a good token: got %d, want 200", got)
	}
	if _, err := store.RevokeMCPToken(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	if got := status("Bearer " + tok); got != http.StatusUnauthorized {
		t.Errorf("revoked: got %d, want 401", got)
	}
	if _, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}}); err == nil {
		t.Error("a session on a revoked token went on working")
	}
}

// A call in flight is stopped when its token is revoked meanwhile: a long
// command does not outlive its token.
func TestRevokeStopsACallInFlight(t *testing.T) {
	store := &memTokens{m: map[string]conch.MCPToken{}}
	audit := &auditRec{}
	sl := sleepy{started: make(chan struct{}, 1)}
	srv, err := New(Options{Tokens: store, Tools: []conch.Tool{sl}, Audit: audit, RevokeCheck: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	tok, rec, _ := NewToken(conch.ConversationKey{Channel: conch.ChannelCLI, ID: "w"}, "", time.Now(), time.Time{})
	_ = store.CreateMCPToken(context.Background(), rec)
	ctx := context.Background()
	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: &http.Client{Transport: bearerRT{tok}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	type result struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "sleepy", Arguments: map[string]any{}})
		done <- result{res, err}
	}()
	<-sl.started
	_, _ = store.RevokeMCPToken(ctx, rec.ID)
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		if got := r.res.Content[0].(*mcp.TextContent).Text; !r.res.IsError || !strings.Contains(got, "revoked") {
			t.Fatalf("got %q (error %v), want a result saying the token was revoked", got, r.res.IsError)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call went on after its token was revoked")
	}
	audit.mu.Lock()
	defer audit.mu.Unlock()
	if len(audit.evs) != 1 || !strings.Contains(string(audit.evs[0].Detail), `"stopped":"token_revoked"`) {
		t.Errorf("audit: %+v", audit.evs)
	}
}
