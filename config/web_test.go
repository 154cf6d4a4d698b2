package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWebDefaultsAndEnv(t *testing.T) {
	home := t.TempDir()
	c, err := Load("", []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, "cfg")})
	if err != nil {
		t.Fatal(err)
	}
	if ps := c.validateWeb(); len(ps) != 0 {
		t.Fatalf("defaults: %v", ps)
	}
	if c.Search.ActiveBackend() != "none" || c.Search.MaxResults != 5 || c.Tools.WebFetchTimeout.D().String() != "20s" || c.Tools.WebFetchMaxChars != 40000 {
		t.Errorf("defaults: %+v %+v", c.Search, c.Tools)
	}
	if n, _ := c.Tools.WebFetchMaxBytesN(); n != 5<<20 {
		t.Errorf("max bytes %d", n)
	}
	if c.Skills.Workspace || c.Skills.SharedDir != filepath.Join(home, ".agents", "skills") || c.Skills.UserDir != filepath.Join(home, "cfg", "conch", "skills") {
		t.Errorf("skills: %+v", c.Skills)
	}

	keyFile := filepath.Join(home, "brave.key")
	os.WriteFile(keyFile, []byte("BSA-from-file\n"), 0o600)
	c, err = Load("", []string{"HOME=" + home, "XDG_CONFIG_HOME=" + t.TempDir(),
		"CONCH_TOOLS_WEB_ALLOW_PRIVATE=10.0.0.0/8, fd00::/8,192.168.1.5",
		"CONCH_TOOLS_WEB_PROXY=http://proxy.internal:3128",
		"TAVILY_API_KEY=tvly-env", "CONCH_SEARCH_BRAVE_API_KEY_FILE=" + keyFile, "CONCH_SEARCH_BACKEND=brave",
		"CONCH_SKILLS_WORKSPACE=true", "CONCH_SKILLS_SHARED_DIR=none"})
	if err != nil {
		t.Fatal(err)
	}
	ps, err := c.Tools.WebAllowPrefixes()
	if err != nil || len(ps) != 3 || ps[0].String() != "10.0.0.0/8" || ps[1].String() != "fd00::/8" || ps[2].String() != "192.168.1.5/32" {
		t.Errorf("allow: %v %v", ps, err)
	}
	if u, _ := c.Tools.WebProxyURL(); u == nil || u.Host != "proxy.internal:3128" {
		t.Errorf("proxy %v", u)
	}
	if c.Search.TavilyAPIKey != "tvly-env" || c.Search.BraveAPIKey != "BSA-from-file" || c.Search.ActiveBackend() != "brave" {
		t.Errorf("search: %+v", c.Search)
	}
	if !c.Skills.Workspace || SkillDir(c.Skills.SharedDir) != "" {
		t.Errorf("skills: %+v", c.Skills)
	}
	if ps := c.validateWeb(); len(ps) != 0 {
		t.Errorf("valid env: %v", ps)
	}
	c, _ = Load("", []string{"HOME=" + home, "XDG_CONFIG_HOME=" + t.TempDir(), "BRAVE_API_KEY=b"})
	if c.Search.ActiveBackend() != "brave" {
		t.Errorf("auto backend with only a Brave key: %s", c.Search.ActiveBackend())
	}
}

func TestWebValidation(t *testing.T) {
	home := t.TempDir()
	cases := []struct {
		env []string
		key string
		fix string
	}{
		{[]string{"CONCH_TOOLS_WEB_ALLOW_PRIVATE=10.0.0.0/33"}, "tools.web_allow_private", "CIDR"},
		{[]string{"CONCH_TOOLS_WEB_ALLOW_PRIVATE=intranet"}, "tools.web_allow_private", "CIDR"},
		{[]string{"CONCH_TOOLS_WEB_PROXY=proxy:3128"}, "tools.web_proxy", "http://host:port"},
		{[]string{"CONCH_TOOLS_WEB_FETCH_MAX_BYTES=lots"}, "tools.web_fetch_max_bytes", "5MiB"},
		{[]string{"CONCH_TOOLS_WEB_FETCH_CONTENT_TYPES=html"}, "tools.web_fetch_content_types", "text/html"},
		{[]string{"CONCH_SEARCH_BACKEND=tavily"}, "search.tavily_api_key", "TAVILY_API_KEY"},
		{[]string{"CONCH_SEARCH_BACKEND=brave"}, "search.brave_api_key", "CONCH_SEARCH_BRAVE_API_KEY"},
		{[]string{"CONCH_SEARCH_BACKEND=searxng"}, "search.searxng_url", "CONCH_SEARCH_SEARXNG_URL"},
		{[]string{"CONCH_SEARCH_BACKEND=google"}, "search.backend", "tavily, brave, searxng or none"},
		{[]string{"CONCH_SEARCH_SEARXNG_URL=searx.local"}, "search.searxng_url", "http://"},
		{[]string{"CONCH_SEARCH_MAX_RESULTS=50"}, "search.max_results", "1 to 20"},
		{[]string{"CONCH_SEARCH_TAVILY_DEPTH=deep", "TAVILY_API_KEY=k"}, "search.tavily_depth", "basic or advanced"},
	}
	for _, c := range cases {
		cfg, err := Load("", append([]string{"HOME=" + home, "XDG_CONFIG_HOME=" + t.TempDir()}, c.env...))
		if err != nil {
			t.Fatalf("%v: %v", c.env, err)
		}
		ps := cfg.validateWeb()
		found := false
		for _, p := range ps {
			if p.Key == c.key && strings.Contains(p.Fix, c.fix) {
				found = true
			}
		}
		if !found {
			t.Errorf("%v: problems %v, want %s with a fix mentioning %q", c.env, ps, c.key, c.fix)
		}
	}
	if _, err := Load("", []string{"HOME=" + home, "CONCH_SEARCH_TAVILY_API_KEY_FILE=/nonexistent/key"}); err == nil || !strings.Contains(err.Error(), "search.tavily_api_key_file") {
		t.Errorf("missing key file: %v", err)
	}
}
