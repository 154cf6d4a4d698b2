package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMCPServersLoadAndValidate(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("  t0ken \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	lock, err := os.ReadFile("../mcp/testdata/server-filesystem.lock.json")
	if err != nil {
		t.Fatal(err)
	}
	lockFile := filepath.Join(dir, "fs.lock.json")
	if err := os.WriteFile(lockFile, lock, 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "conch.toml")
	body := `[[mcp.servers]]
name = "docs"
url = "https://mcp.example.com/mcp"
token_file = "` + tok + `"
include = ["search"]
timeout = "30s"
channels = ["telegram"]

[[mcp.servers]]
name = "fs"
package = "@modelcontextprotocol/server-filesystem@2026.8.31"
package_lock = "` + lockFile + `"
args = ["/workspace"]
`
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(file, []string{"HOME=" + dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.MCP.Servers) != 2 {
		t.Fatalf("servers %+v", c.MCP.Servers)
	}
	if ps := c.MCP.validateServers(); len(ps) != 0 {
		t.Fatalf("valid servers: %v", ps)
	}
	docs, _ := c.MCP.Server("docs")
	if got, err := docs.LoadToken(); err != nil || got != "t0ken" {
		t.Errorf("token %q, %v", got, err)
	}
	fs, _ := c.MCP.Server("fs")
	if !fs.Stdio() || fs.StdioCommand() != "mcp-fs" {
		t.Errorf("fs: stdio %v command %q", fs.Stdio(), fs.StdioCommand())
	}
	in, ok, err := fs.Install()
	if err != nil || !ok || in.Name != "mcp-fs" || len(in.Tarballs) < 50 {
		t.Errorf("install %s with %d tarballs, %v %v", in.Name, len(in.Tarballs), ok, err)
	}

	for _, tc := range []struct {
		s   MCPServerConfig
		key string
	}{
		{MCPServerConfig{Name: "Bad_Name", URL: "https://x"}, "name"},
		{MCPServerConfig{Name: "a"}, "command"},
		{MCPServerConfig{Name: "a", URL: "https://x", Command: "x"}, "command"},
		{MCPServerConfig{Name: "a", URL: "ftp://x"}, "url"},
		{MCPServerConfig{Name: "a", URL: "https://x", Transport: "websocket"}, "transport"},
		{MCPServerConfig{Name: "a", URL: "https://x", TokenFile: filepath.Join(dir, "missing")}, "token_file"},
		{MCPServerConfig{Name: "a", Command: "x", TokenFile: tok}, "token_file"},
		{MCPServerConfig{Name: "a", Command: "x", AllowPrivate: true}, "allow_private"},
		{MCPServerConfig{Name: "a", Command: "x", Env: []string{"NOEQUALS"}}, "env"},
		{MCPServerConfig{Name: "a", Command: "x", Conversations: []string{"nochannel"}}, "conversations"},
		{MCPServerConfig{Name: "a", Command: "x", Include: []string{"t"}, Exclude: []string{"t"}}, "exclude"},
		{MCPServerConfig{Name: "a", Package: "@scope/pkg"}, "package"},
		{MCPServerConfig{Name: "a", Command: "x", EgressURL: "https://api.example.com"}, "egress_url_env"},
		{MCPServerConfig{Name: "a", Command: "x", EgressURL: "https://user:pw@api.example.com", EgressURLEnv: "U", EgressSecretFile: tok}, "egress_url"},
		{MCPServerConfig{Name: "a", Command: "x", EgressURL: "https://api.example.com", EgressURLEnv: "U"}, "egress_secret_file"},
		{MCPServerConfig{Name: "a", Command: "x", EgressURLEnv: "U"}, "egress_url"},
		{MCPServerConfig{Name: "a", URL: "https://x", EgressURL: "https://api.example.com"}, "egress_url"},
		{MCPServerConfig{Name: "a", URL: "https://x", OAuth: true, TokenFile: tok}, "oauth"},
		{MCPServerConfig{Name: "a", URL: "https://x", OAuth: true, OAuthClientSecretFile: filepath.Join(dir, "missing")}, "oauth_client_secret_file"},
		{MCPServerConfig{Name: "a", Command: "x", OAuth: true}, "oauth"},
		{MCPServerConfig{Name: "a", Package: "@modelcontextprotocol/server-filesystem@2026.8.31"}, "package"},
		{MCPServerConfig{Name: "a", Package: "@modelcontextprotocol/server-filesystem@1.0.0", PackageLock: lockFile}, "package"},
	} {
		ps := MCPConfig{Servers: []MCPServerConfig{tc.s}}.validateServers()
		if len(ps) == 0 || !strings.HasSuffix(ps[0].Key, "."+tc.key) || ps[0].Fix == "" {
			t.Errorf("%+v: problems %v, want one on %s with a fix", tc.s, ps, tc.key)
		}
	}
	e := MCPServerConfig{Name: "a", Command: "x", EgressURL: "https://api.example.com", EgressURLEnv: "U", EgressSecretFile: tok}
	if ps := (MCPConfig{Servers: []MCPServerConfig{e}}).validateServers(); len(ps) != 0 {
		t.Errorf("valid egress: %v", ps)
	}
	if h, p := e.EgressHeaderAndPrefix(); h != "Authorization" || p != "Bearer " {
		t.Errorf("default egress header %q %q", h, p)
	}
	empty := ""
	e.EgressHeader, e.EgressPrefix = "X-Api-Key", &empty
	if h, p := e.EgressHeaderAndPrefix(); h != "X-Api-Key" || p != "" {
		t.Errorf("egress header %q %q", h, p)
	}
	dup := MCPConfig{Servers: []MCPServerConfig{{Name: "a", URL: "https://x"}, {Name: "a", URL: "https://y"}}}.validateServers()
	if len(dup) != 1 || !strings.Contains(dup[0].Msg, "twice") {
		t.Errorf("a repeated name: %v", dup)
	}
}
