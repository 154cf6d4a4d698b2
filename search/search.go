// Package search implements web search backends over their HTTP JSON APIs:
// Tavily, Brave Search and a self-hosted SearXNG. Each is a conch web_search
// backend (conch.SearchBackend); none reads the environment.
package search

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"conch"
)

// Result is one search hit (conch.SearchResult).
type Result = conch.SearchResult

// Query is one search (conch.SearchQuery).
type Query = conch.SearchQuery

// Error is a backend's failure, with text safe to show the model
// (conch.SearchError).
type Error = conch.SearchError

// ErrNotConfigured is returned by New when the backend lacks its key or URL.
var ErrNotConfigured = errors.New("search backend not configured")

// Config selects and configures a backend.
type Config struct {
	// Backend is tavily, brave or searxng.
	Backend string
	// APIKey is Tavily's or Brave's key.
	APIKey string
	// BaseURL replaces the backend's public endpoint; required for searxng
	// (its instance, e.g. http://127.0.0.1:8888).
	BaseURL string
	// Depth is Tavily's search_depth: basic or advanced.
	Depth string
	// Timeout bounds one search; 0 means 15s.
	Timeout time.Duration
	// Proxy is conch's explicitly configured proxy; nil means none. The
	// environment's proxy variables are never used.
	Proxy *url.URL
	// HTTPClient replaces the client (tests).
	HTTPClient *http.Client
}

// Backend searches the web (conch.SearchBackend).
type Backend = conch.SearchBackend

// New returns the configured backend.
func New(c Config) (Backend, error) {
	if c.Timeout <= 0 {
		c.Timeout = 15 * time.Second
	}
	if c.HTTPClient == nil {
		tr := &http.Transport{Proxy: nil, ForceAttemptHTTP2: true, TLSHandshakeTimeout: 10 * time.Second, IdleConnTimeout: 60 * time.Second}
		if c.Proxy != nil {
			p := c.Proxy
			tr.Proxy = func(r *http.Request) (*url.URL, error) {
				// A self-hosted backend on this machine is not reached through a proxy.
				if ip := net.ParseIP(r.URL.Hostname()); (ip != nil && ip.IsLoopback()) || r.URL.Hostname() == "localhost" {
					return nil, nil
				}
				return p, nil
			}
		}
		c.HTTPClient = &http.Client{Transport: tr, Timeout: c.Timeout}
	}
	switch c.Backend {
	case "tavily":
		if c.APIKey == "" {
			return nil, fmt.Errorf("tavily: %w: no API key", ErrNotConfigured)
		}
		return &Tavily{c: c}, nil
	case "brave":
		if c.APIKey == "" {
			return nil, fmt.Errorf("brave: %w: no API key", ErrNotConfigured)
		}
		return &Brave{c: c}, nil
	case "searxng":
		if c.BaseURL == "" {
			return nil, fmt.Errorf("searxng: %w: no instance URL", ErrNotConfigured)
		}
		return &SearXNG{c: c}, nil
	}
	return nil, fmt.Errorf("unknown search backend %q (use tavily, brave or searxng)", c.Backend)
}

// do sends req and decodes a JSON answer into out; a non-2xx answer becomes
// an *Error carrying the service's message.
func do(c *http.Client, backend string, req *http.Request, out any) error {
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "conch-web-search/1")
	resp, err := c.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return &Error{Backend: backend, Msg: "request failed: " + err.Error()}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return &Error{Backend: backend, Msg: "reading the answer: " + err.Error()}
	}
	if resp.StatusCode/100 != 2 {
		return &Error{Backend: backend, Status: resp.StatusCode, Msg: errorText(resp.StatusCode, body)}
	}
	if err := json.Unmarshal(body, out); err != nil {
		return &Error{Backend: backend, Msg: "the answer is not the expected JSON: " + err.Error()}
	}
	return nil
}

// errorText picks the service's own message out of an error body.
func errorText(status int, body []byte) string {
	var v struct {
		Detail any    `json:"detail"`
		Error  any    `json:"error"`
		Msg    string `json:"message"`
	}
	if json.Unmarshal(body, &v) == nil {
		for _, x := range []any{v.Detail, v.Error, v.Msg} {
			switch x := x.(type) {
			case string:
				if x != "" {
					return x
				}
			case map[string]any:
				for _, k := range []string{"error", "detail", "message"} {
					if s, ok := x[k].(string); ok && s != "" {
						return s
					}
				}
			}
		}
	}
	text := strings.TrimSpace(string(bytes.ToValidUTF8(body, nil)))
	if len(text) > 200 {
		text = text[:200] + "…"
	}
	if text == "" {
		text = http.StatusText(status)
	}
	return text
}

func endpoint(base, def, path string) string {
	if base == "" {
		base = def
	}
	return strings.TrimSuffix(base, "/") + path
}
