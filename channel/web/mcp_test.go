package web

import (
	"encoding/json"
	"strings"
	"testing"

	"conch"
)

// TestDashboardMCP: the dashboard lists the MCP servers the wiring gives it.
func TestDashboardMCP(t *testing.T) {
	ts := newTestServer(t, func(o *Options) {
		o.MCP = func() []conch.MCPServerStatus {
			return []conch.MCPServerStatus{{Name: "docs", Kind: "remote", Tools: 8, Ready: 1},
				{Name: "fs", Kind: "stdio", Tools: 14, Ready: 2, Down: 1, LastError: "the server exited with status 3", Restarts: 4}}
		}
	})
	st, body := ts.do(ts.client(), "GET", "/api/dashboard", nil)
	var d struct {
		MCP []conch.MCPServerStatus `json:"mcp"`
	}
	if err := json.Unmarshal(body, &d); err != nil || st != 200 {
		t.Fatalf("dashboard: %d %s", st, body)
	}
	if len(d.MCP) != 2 || d.MCP[1].Name != "fs" || d.MCP[1].Down != 1 || d.MCP[1].LastError == "" || d.MCP[0].Tools != 8 {
		t.Errorf("mcp: %+v", d.MCP)
	}
	ts2 := newTestServer(t)
	if _, body := ts2.do(ts2.client(), "GET", "/api/dashboard", nil); !json.Valid(body) || !strings.Contains(string(body), `"mcp":[]`) {
		t.Errorf("without MCP the list is empty, not missing: %s", body)
	}
}
