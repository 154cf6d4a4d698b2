package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"conch/internal/flock"

	"github.com/modelcontextprotocol/go-sdk/auth"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// OAuthGrant is what `conch mcp login` keeps of a remote server's OAuth 2.1
// sign-in: the token (with its refresh token) and what refreshing it needs.
// It is stored in a file of its own, mode 0600, never in the sandbox.
type OAuthGrant struct {
	Token        *oauth2.Token `json:"token"`
	ClientID     string        `json:"client_id"`
	ClientSecret string        `json:"client_secret,omitempty"`
	AuthURL      string        `json:"auth_url"`
	TokenURL     string        `json:"token_url"`
	AuthStyle    int           `json:"auth_style"`
	Scopes       []string      `json:"scopes,omitempty"`
}

func (g *OAuthGrant) config() *oauth2.Config {
	return &oauth2.Config{ClientID: g.ClientID, ClientSecret: g.ClientSecret, Scopes: g.Scopes,
		Endpoint: oauth2.Endpoint{AuthURL: g.AuthURL, TokenURL: g.TokenURL, AuthStyle: oauth2.AuthStyle(g.AuthStyle)}}
}

// LoginOptions configure Login.
type LoginOptions struct {
	// RedirectURL is where the authorization server sends the browser
	// back (conch's loopback listener).
	RedirectURL string
	// ClientID (and ClientSecret) of a client registered with the
	// authorization server; "" registers one dynamically.
	ClientID, ClientSecret string
	// Authorize shows the authorization URL to the person and returns
	// the code and state the redirect brought back.
	Authorize auth.AuthorizationCodeFetcher
}

// Login signs conch in to a remote server with OAuth 2.1 as the MCP
// authorization spec describes: the server's 401 names its protected
// resource metadata, that names the authorization server, whose metadata
// gives the endpoints; the client is registered (or given), the person
// authorizes in a browser (PKCE, S256), the code is exchanged for tokens.
// It connects once with the token to prove it and returns the grant.
func (c *Client) Login(ctx context.Context, name string, o LoginOptions) (*OAuthGrant, error) {
	s := c.server(name)
	if s == nil || s.Stdio() {
		return nil, fmt.Errorf("no remote MCP server %q is configured", name)
	}
	var mu sync.Mutex
	grant := &OAuthGrant{}
	cfg := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL:              o.RedirectURL,
		AuthorizationCodeFetcher: o.Authorize,
		RequestRefreshToken:      true,
		Client:                   c.plainHTTP[name],
		NewTokenSource: func(ctx context.Context, oc *oauth2.Config, tok *oauth2.Token) (oauth2.TokenSource, error) {
			mu.Lock()
			grant.ClientID, grant.ClientSecret, grant.Scopes = oc.ClientID, oc.ClientSecret, oc.Scopes
			grant.AuthURL, grant.TokenURL, grant.AuthStyle = oc.Endpoint.AuthURL, oc.Endpoint.TokenURL, int(oc.Endpoint.AuthStyle)
			grant.Token = tok
			mu.Unlock()
			return oc.TokenSource(ctx, tok), nil
		},
	}
	if o.ClientID != "" {
		pc := &oauthex.ClientCredentials{ClientID: o.ClientID}
		if o.ClientSecret != "" {
			pc.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: o.ClientSecret}
		}
		cfg.PreregisteredClient = pc
	} else {
		cfg.DynamicClientRegistrationConfig = &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName: "conch", RedirectURIs: []string{o.RedirectURL},
			GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"}, TokenEndpointAuthMethod: "none",
		}}
	}
	h, err := auth.NewAuthorizationCodeHandler(cfg)
	if err != nil {
		return nil, fmt.Errorf("oauth: %w", err)
	}
	t := &mcpsdk.StreamableClientTransport{Endpoint: s.URL, HTTPClient: c.plainHTTP[name], OAuthHandler: h, MaxRetries: -1, DisableStandaloneSSE: true}
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "conch", Version: "1"}, nil)
	sess, err := client.Connect(ctx, t, nil)
	if err != nil {
		return nil, fmt.Errorf("sign in to %s: %w", name, err)
	}
	_ = sess.Close()
	mu.Lock()
	defer mu.Unlock()
	if grant.Token == nil {
		return nil, fmt.Errorf("sign in to %s: the server let conch in without asking for authorization; it needs no login", name)
	}
	return grant, nil
}

// OAuthStore keeps grants as <dir>/<server>.json (0600) and gives the
// token sources that refresh them, writing every refreshed token back (a
// rotated refresh token must not be lost).
type OAuthStore struct{ Dir string }

func (st OAuthStore) path(server string) string { return filepath.Join(st.Dir, server+".json") }

// Save writes a grant atomically.
func (st OAuthStore) Save(server string, g *OAuthGrant) error {
	if err := os.MkdirAll(st.Dir, 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		return err
	}
	tmp := st.path(server) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, st.path(server))
}

// Load reads a grant.
func (st OAuthStore) Load(server string) (*OAuthGrant, error) {
	b, err := os.ReadFile(st.path(server))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("not signed in: run `conch mcp login %s`", server)
	}
	if err != nil {
		return nil, err
	}
	var g OAuthGrant
	if err := json.Unmarshal(b, &g); err != nil || g.Token == nil {
		return nil, fmt.Errorf("the sign-in of %s in %s is damaged: run `conch mcp login %s` again", server, st.path(server), server)
	}
	return &g, nil
}

// TokenSource returns the server's tokens: the stored one while valid,
// then refreshed through hc (and stored). A grant that cannot be read or
// refreshed is an error naming `conch mcp login`.
func (st OAuthStore) TokenSource(server string, hc *http.Client) oauth2.TokenSource {
	return &storedTokens{st: st, server: server, hc: hc}
}

type storedTokens struct {
	st     OAuthStore
	server string
	hc     *http.Client
	mu     sync.Mutex
	ts     oauth2.TokenSource
	g      *OAuthGrant
}

func (s *storedTokens) Token() (*oauth2.Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Another conch process (`conch mcp test` beside `conch up`) may
	// refresh too: the lock and re-read keep one rotation at a time.
	if err := os.MkdirAll(s.st.Dir, 0o700); err != nil {
		return nil, err
	}
	lctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	unlock, err := flock.Lock(lctx, s.st.path(s.server)+".lock")
	if err != nil {
		return nil, err
	}
	defer unlock()
	g, err := s.st.Load(s.server)
	if err != nil {
		return nil, err
	}
	if s.g == nil || g.Token.RefreshToken != s.g.Token.RefreshToken || g.Token.AccessToken != s.g.Token.AccessToken {
		s.g = g
		ctx := context.WithValue(context.Background(), oauth2.HTTPClient, s.hc)
		s.ts = g.config().TokenSource(ctx, g.Token)
	}
	tok, err := s.ts.Token()
	if err != nil {
		return nil, fmt.Errorf("refresh the sign-in of %s (run `conch mcp login %s` again if it was revoked): %w", s.server, s.server, err)
	}
	if tok.AccessToken != s.g.Token.AccessToken {
		s.g.Token = tok
		if err := s.st.Save(s.server, s.g); err != nil {
			return nil, fmt.Errorf("keep the refreshed sign-in of %s: %w", s.server, err)
		}
	}
	return tok, nil
}
