package config

import (
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Host-side tool settings of [tools] (web_fetch) live in ToolsConfig; web
// search in [search]; skills in [skills].

// SearchConfig selects the web_search backend.
type SearchConfig struct {
	// Backend is tavily | brave | searxng | none; "" picks the first one
	// whose key or URL is set (tavily, brave, searxng), else none.
	Backend string `toml:"backend" env:"BACKEND"`
	// TavilyAPIKey also falls back to TAVILY_API_KEY (secret: prefer the file or the environment).
	TavilyAPIKey     string `toml:"tavily_api_key" env:"TAVILY_API_KEY"`
	TavilyAPIKeyFile string `toml:"tavily_api_key_file" env:"TAVILY_API_KEY_FILE"`
	// TavilyDepth is basic (fast) or advanced (deeper, costs two credits).
	TavilyDepth string `toml:"tavily_depth" env:"TAVILY_DEPTH"`
	// BraveAPIKey also falls back to BRAVE_API_KEY.
	BraveAPIKey     string `toml:"brave_api_key" env:"BRAVE_API_KEY"`
	BraveAPIKeyFile string `toml:"brave_api_key_file" env:"BRAVE_API_KEY_FILE"`
	// SearXNGURL is a SearXNG instance with the json format enabled.
	SearXNGURL string `toml:"searxng_url" env:"SEARXNG_URL"`
	// BaseURL replaces Tavily's or Brave's public endpoint (a relay).
	BaseURL string `toml:"base_url" env:"BASE_URL"`
	// MaxResults is the default and largest number of results (1–20).
	MaxResults int      `toml:"max_results" env:"MAX_RESULTS"`
	Timeout    Duration `toml:"timeout" env:"TIMEOUT"`
}

// SkillsConfig configures skill discovery.
type SkillsConfig struct {
	// Workspace also reads skills from each conversation's
	// /workspace/.agents/skills. A workspace is written by the model, so this
	// is off by default.
	Workspace bool `toml:"workspace" env:"WORKSPACE"`
	// SharedDir is the skills directory shared with other agents; default
	// ~/.agents/skills; "none" skips it.
	SharedDir string `toml:"shared_dir" env:"SHARED_DIR"`
	// UserDir holds conch's own user skills; default
	// $XDG_CONFIG_HOME/conch/skills (or ~/.config/conch/skills); "none" skips it.
	UserDir string `toml:"user_dir" env:"USER_DIR"`
}

// ActiveBackend returns the search backend in use: the configured one, or
// for "" the first with its key or URL set; "none" when there is none.
func (s SearchConfig) ActiveBackend() string {
	switch {
	case s.Backend != "":
		return s.Backend
	case s.TavilyAPIKey != "":
		return "tavily"
	case s.BraveAPIKey != "":
		return "brave"
	case s.SearXNGURL != "":
		return "searxng"
	}
	return "none"
}

// WebAllowPrefixes parses tools.web_allow_private.
func (t ToolsConfig) WebAllowPrefixes() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range t.WebAllowPrivate {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("%q is not a CIDR range", s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// WebProxyURL parses tools.web_proxy; nil when unset.
func (t ToolsConfig) WebProxyURL() (*url.URL, error) {
	if t.WebProxy == "" {
		return nil, nil
	}
	u, err := url.Parse(t.WebProxy)
	if err != nil {
		return nil, err
	}
	if (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "socks5") || u.Host == "" {
		return nil, fmt.Errorf("%q is not a proxy URL like http://proxy.example:3128", t.WebProxy)
	}
	return u, nil
}

// WebFetchMaxBytesN returns tools.web_fetch_max_bytes in bytes; 0 means the default.
func (t ToolsConfig) WebFetchMaxBytesN() (int64, error) {
	if t.WebFetchMaxBytes == "" {
		return 0, nil
	}
	return ParseSize(t.WebFetchMaxBytes)
}

// loadWeb fills secrets from their files and the providers' usual
// variables, and the skills directories' defaults.
func (c *Config) loadWeb(envMap map[string]string) error {
	s := &c.Search
	if s.TavilyAPIKey == "" && s.TavilyAPIKeyFile == "" {
		s.TavilyAPIKey = envMap["TAVILY_API_KEY"]
	}
	if s.BraveAPIKey == "" && s.BraveAPIKeyFile == "" {
		s.BraveAPIKey = envMap["BRAVE_API_KEY"]
	}
	for _, f := range []struct {
		key, file string
		dst       *string
	}{{"search.tavily_api_key_file", s.TavilyAPIKeyFile, &s.TavilyAPIKey}, {"search.brave_api_key_file", s.BraveAPIKeyFile, &s.BraveAPIKey}} {
		if f.file == "" || *f.dst != "" {
			continue
		}
		b, err := os.ReadFile(f.file)
		if err != nil {
			return fmt.Errorf("%s: %w", f.key, err)
		}
		*f.dst = strings.TrimSpace(string(b))
	}
	home := envMap["HOME"]
	if c.Skills.SharedDir == "" && home != "" {
		c.Skills.SharedDir = filepath.Join(home, ".agents", "skills")
	}
	if c.Skills.UserDir == "" {
		switch {
		case envMap["XDG_CONFIG_HOME"] != "":
			c.Skills.UserDir = filepath.Join(envMap["XDG_CONFIG_HOME"], "conch", "skills")
		case home != "":
			c.Skills.UserDir = filepath.Join(home, ".config", "conch", "skills")
		}
	}
	return nil
}

// SkillDir returns a configured skills directory, "" for "none".
func SkillDir(d string) string {
	if d == "none" {
		return ""
	}
	return d
}

func (c *Config) validateWeb() []Problem {
	var ps []Problem
	add := func(key, msg, fix string) { ps = append(ps, Problem{key, msg, fix}) }
	t := c.Tools
	if _, err := t.WebAllowPrefixes(); err != nil {
		add("tools.web_allow_private", err.Error(), "list CIDR ranges like 10.0.0.0/8 or fd00::/8 (CONCH_TOOLS_WEB_ALLOW_PRIVATE is comma-separated)")
	}
	if _, err := t.WebProxyURL(); err != nil {
		add("tools.web_proxy", err.Error(), "set an http://host:port proxy URL, or leave it empty for direct connections")
	}
	if n, err := t.WebFetchMaxBytesN(); err != nil || n < 0 {
		add("tools.web_fetch_max_bytes", fmt.Sprintf("%q is not a size", t.WebFetchMaxBytes), "use a size like 5MiB")
	}
	if t.WebFetchTimeout.D() < 0 {
		add("tools.web_fetch_timeout", "is negative", "use a duration like 20s")
	}
	if t.WebFetchMaxChars < 0 {
		add("tools.web_fetch_max_chars", "is negative", "use a number of characters like 40000")
	}
	for _, ct := range t.WebFetchContentTypes {
		if !strings.Contains(ct, "/") {
			add("tools.web_fetch_content_types", fmt.Sprintf("%q is not a media type", ct), "list media types like text/html or text/*")
		}
	}
	s := c.Search
	switch s.ActiveBackend() {
	case "none":
	case "tavily":
		if s.TavilyAPIKey == "" {
			add("search.tavily_api_key", "search.backend is tavily but there is no Tavily API key", "set CONCH_SEARCH_TAVILY_API_KEY or TAVILY_API_KEY, or [search] tavily_api_key_file")
		}
	case "brave":
		if s.BraveAPIKey == "" {
			add("search.brave_api_key", "search.backend is brave but there is no Brave Search API key", "set CONCH_SEARCH_BRAVE_API_KEY or BRAVE_API_KEY, or [search] brave_api_key_file")
		}
	case "searxng":
		if s.SearXNGURL == "" {
			add("search.searxng_url", "search.backend is searxng but no instance URL is set", "set CONCH_SEARCH_SEARXNG_URL, e.g. http://127.0.0.1:8888")
		}
	default:
		add("search.backend", fmt.Sprintf("unknown search backend %q", s.Backend), "use tavily, brave, searxng or none")
	}
	if s.SearXNGURL != "" {
		if u, err := url.Parse(s.SearXNGURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("search.searxng_url", fmt.Sprintf("%q is not an http(s) URL", s.SearXNGURL), "set the instance's base URL, e.g. http://127.0.0.1:8888")
		}
	}
	if s.BaseURL != "" {
		if u, err := url.Parse(s.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("search.base_url", fmt.Sprintf("%q is not an http(s) URL", s.BaseURL), "set an http(s) URL or leave it empty for the service's own endpoint")
		}
	}
	switch s.TavilyDepth {
	case "", "basic", "advanced":
	default:
		add("search.tavily_depth", fmt.Sprintf("unknown depth %q", s.TavilyDepth), "use basic or advanced")
	}
	if s.MaxResults < 1 || s.MaxResults > 20 {
		add("search.max_results", fmt.Sprintf("%d is outside 1–20", s.MaxResults), "set a number from 1 to 20, e.g. 5")
	}
	if s.Timeout.D() <= 0 {
		add("search.timeout", "must be positive", "use a duration like 15s")
	}
	return ps
}
