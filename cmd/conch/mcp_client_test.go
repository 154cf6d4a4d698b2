package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"conch/mcp"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestMCPMetrics: every configured server has its series from the start;
// calls and starts are counted by server and outcome only.
func TestMCPMetrics(t *testing.T) {
	m := newMCPMetrics()
	reg := prometheus.NewRegistry()
	if err := m.register(reg, []string{"docs", "fs"}); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(m.calls); n != 6 {
		t.Errorf("%d call series before any call, want 3 outcomes × 2 servers", n)
	}
	m.call(mcp.CallEvent{Server: "docs", Tool: "search", Duration: 30 * time.Millisecond, Outcome: "tool_error"})
	m.start("fs", true, errors.New("exited"))
	if got := testutil.ToFloat64(m.calls.WithLabelValues("docs", "tool_error")); got != 1 {
		t.Errorf("tool_error calls %v", got)
	}
	want := `
# HELP conch_mcp_server_starts_total Starts of MCP servers (result: ok, failed; restart: true after a death or failure).
# TYPE conch_mcp_server_starts_total counter
conch_mcp_server_starts_total{restart="true",result="failed",server="fs"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "conch_mcp_server_starts_total"); err != nil {
		t.Error(err)
	}
}
