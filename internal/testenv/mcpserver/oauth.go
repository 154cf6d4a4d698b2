package mcpserver

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// OAuthServer is an OAuth 2.1 authorization server and a protected MCP
// server in one, as the MCP authorization spec lays them out: protected
// resource metadata, authorization server metadata, dynamic client
// registration, the authorization endpoint (it approves at once), the token
// endpoint (PKCE S256, refresh tokens that rotate).
type OAuthServer struct {
	*httptest.Server
	mu        sync.Mutex
	challenge map[string]string // code → code_challenge
	access    map[string]bool
	refresh   map[string]bool
	n         int
	// Refreshed counts refresh-token grants.
	Refreshed int
}

func NewOAuth(t testing.TB) *OAuthServer {
	t.Helper()
	as := &OAuthServer{challenge: map[string]string{}, access: map[string]bool{}, refresh: map[string]bool{}}
	srv := New(Options{})
	mcpH := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil)
	mux := http.NewServeMux()
	js := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	prm := func(w http.ResponseWriter, r *http.Request) {
		js(w, map[string]any{"resource": as.URL + "/mcp", "authorization_servers": []string{as.URL}})
	}
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", prm)
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		js(w, map[string]any{"issuer": as.URL, "authorization_endpoint": as.URL + "/authorize", "token_endpoint": as.URL + "/token",
			"registration_endpoint": as.URL + "/register", "response_types_supported": []string{"code"},
			"grant_types_supported": []string{"authorization_code", "refresh_token"}, "code_challenge_methods_supported": []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"none"}})
	})
	mux.HandleFunc("POST /register", func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		_ = json.NewDecoder(r.Body).Decode(&m)
		m["client_id"] = "client-1"
		w.WriteHeader(http.StatusCreated)
		js(w, m)
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("client_id") != "client-1" || q.Get("code_challenge_method") != "S256" || q.Get("resource") != as.URL+"/mcp" {
			http.Error(w, "bad authorization request: "+r.URL.RawQuery, http.StatusBadRequest)
			return
		}
		as.mu.Lock()
		as.n++
		code := fmt.Sprintf("code-%d", as.n)
		as.challenge[code] = q.Get("code_challenge")
		as.mu.Unlock()
		http.Redirect(w, r, q.Get("redirect_uri")+"?code="+code+"&state="+url.QueryEscape(q.Get("state")), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		as.mu.Lock()
		defer as.mu.Unlock()
		switch r.Form.Get("grant_type") {
		case "authorization_code":
			sum := sha256.Sum256([]byte(r.Form.Get("code_verifier")))
			if ch, ok := as.challenge[r.Form.Get("code")]; !ok || ch != base64.RawURLEncoding.EncodeToString(sum[:]) {
				w.WriteHeader(http.StatusBadRequest)
				js(w, map[string]string{"error": "invalid_grant"})
				return
			}
			delete(as.challenge, r.Form.Get("code"))
		case "refresh_token":
			if !as.refresh[r.Form.Get("refresh_token")] {
				w.WriteHeader(http.StatusBadRequest)
				js(w, map[string]string{"error": "invalid_grant"})
				return
			}
			delete(as.refresh, r.Form.Get("refresh_token"))
			as.Refreshed++
		default:
			w.WriteHeader(http.StatusBadRequest)
			js(w, map[string]string{"error": "unsupported_grant_type"})
			return
		}
		as.n++
		at, rt := fmt.Sprintf("access-%d", as.n), fmt.Sprintf("refresh-%d", as.n)
		as.access[at], as.refresh[rt] = true, true
		js(w, map[string]any{"access_token": at, "token_type": "Bearer", "refresh_token": rt, "expires_in": 3600})
	})
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		as.mu.Lock()
		ok := as.access[tok]
		as.mu.Unlock()
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+as.URL+`/.well-known/oauth-protected-resource/mcp"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mcpH.ServeHTTP(w, r)
	})
	as.Server = httptest.NewServer(mux)
	t.Cleanup(as.Close)
	return as
}

// Expire makes every access token invalid, as time would.
func (as *OAuthServer) Expire() {
	as.mu.Lock()
	as.access = map[string]bool{}
	as.mu.Unlock()
}
