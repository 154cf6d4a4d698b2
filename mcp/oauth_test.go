package mcp

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"conch"
	"conch/internal/testenv/mcpserver"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// approve is the person's browser: it follows the authorization URL and
// hands back what the redirect carried.
func approve(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, args.URL, nil)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusFound {
		return nil, fmt.Errorf("authorization: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	return &auth.AuthorizationResult{Code: loc.Query().Get("code"), State: loc.Query().Get("state")}, nil
}

// TestOAuthLogin: a server behind OAuth 2.1 is not usable before `conch mcp
// login` (its state says how to sign in); after the sign-in (discovery,
// dynamic registration, PKCE) its tools work with the stored token, an
// expired token is refreshed and the rotated refresh token kept (0600).
func TestOAuthLogin(t *testing.T) {
	as := mcpserver.NewOAuth(t)
	dir := t.TempDir()
	c := newClientWith(t, Options{OAuthDir: dir}, Server{Name: "corp", URL: as.URL + "/mcp", OAuth: true, Policy: loopback})
	if tools := c.Tools(context.Background(), conch.ToolEnv{Conversation: key}); len(tools) != 0 {
		t.Fatalf("tools before the sign-in: %d", len(tools))
	}
	if st := c.States(key); len(st) != 1 || !strings.Contains(st[0].Err, "conch mcp login corp") {
		t.Fatalf("state before the sign-in: %+v", st)
	}

	login := newClientWith(t, Options{OAuthDir: dir}, Server{Name: "corp", URL: as.URL + "/mcp", Policy: loopback})
	g, err := login.Login(context.Background(), "corp", LoginOptions{RedirectURL: "http://127.0.0.1:8976/callback", Authorize: approve})
	if err != nil {
		t.Fatal(err)
	}
	if g.ClientID != "client-1" || g.Token.RefreshToken == "" || g.TokenURL != as.URL+"/token" {
		t.Fatalf("grant %+v", g)
	}
	st := OAuthStore{Dir: dir}
	if err := st.Save("corp", g); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "corp.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("grant file: %v %v", fi, err)
	}

	c2 := newClientWith(t, Options{OAuthDir: dir}, Server{Name: "corp", URL: as.URL + "/mcp", OAuth: true, Policy: loopback})
	tools := toolsByName(c2.Tools(context.Background(), conch.ToolEnv{Conversation: key}))
	if out := run(t, tools["mcp__corp__echo"], `{"text":"signed in"}`); out.Content != "echo: signed in" {
		t.Fatalf("after the sign-in: %+v (states %+v)", out, c2.States(key))
	}

	// The access token expires: the next connection refreshes it and the
	// rotated refresh token is written back.
	as.Expire()
	before, _ := st.Load("corp")
	c3 := newClientWith(t, Options{OAuthDir: dir}, Server{Name: "corp", URL: as.URL + "/mcp", OAuth: true, Policy: loopback})
	g3, _ := st.Load("corp")
	g3.Token.Expiry = g3.Token.Expiry.AddDate(-1, 0, 0) // as the clock would say
	if err := st.Save("corp", g3); err != nil {
		t.Fatal(err)
	}
	tools = toolsByName(c3.Tools(context.Background(), conch.ToolEnv{Conversation: key}))
	if out := run(t, tools["mcp__corp__echo"], `{"text":"refreshed"}`); out.Content != "echo: refreshed" {
		t.Fatalf("after expiry: %+v (states %+v)", out, c3.States(key))
	}
	after, _ := st.Load("corp")
	// A server that echoes the token it was sent gives the model nothing.
	if out := run(t, tools["mcp__corp__echo"], `{"text":"`+after.Token.AccessToken+`"}`); out.Content != "echo: [REDACTED]" {
		t.Errorf("the access token reached the model: %+v", out)
	}
	if as.Refreshed != 1 || after.Token.RefreshToken == before.Token.RefreshToken || after.Token.AccessToken == before.Token.AccessToken {
		t.Errorf("refreshed %d times; refresh token %q → %q", as.Refreshed, before.Token.RefreshToken, after.Token.RefreshToken)
	}
}

func newClientWith(t *testing.T, o Options, servers ...Server) *Client {
	t.Helper()
	o.Servers = servers
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
