package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"conch"
	"conch/config"
	"conch/mcp"
	"conch/netpolicy"
	"conch/npmpin"

	"github.com/prometheus/client_golang/prometheus"
)

// mcpServers turns the [[mcp.servers]] config into the client's servers;
// tokens are read from their key files here.
func mcpServers(cfg *config.Config) ([]mcp.Server, error) {
	var out []mcp.Server
	for _, sc := range cfg.MCP.Servers {
		s := mcp.Server{
			Name: sc.Name, Env: sc.Env, URL: sc.URL, Transport: sc.Transport,
			Include: sc.Include, Exclude: sc.Exclude, Timeout: sc.Timeout.D(),
		}
		if sc.Stdio() {
			s.Argv = append([]string{sc.StdioCommand()}, sc.Args...)
		}
		tok, err := sc.LoadToken()
		if err != nil {
			return nil, err
		}
		s.Token = tok
		if sc.AllowPrivate {
			s.Policy = netpolicy.Policy{Allow: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}}
		}
		for _, ch := range sc.Channels {
			s.Channels = append(s.Channels, conch.ChannelName(ch))
		}
		for _, k := range sc.Conversations {
			key, err := conch.ParseConversationKey(k)
			if err != nil {
				return nil, fmt.Errorf("mcp.servers[%s].conversations: %w", sc.Name, err)
			}
			s.Conversations = append(s.Conversations, key)
		}
		out = append(out, s)
	}
	return out, nil
}

// mcpInstalls are the stdio servers' pinned packages, built into the
// derived sandbox image beside the coding CLI.
func mcpInstalls(cfg *config.Config) ([]npmpin.Install, error) {
	var out []npmpin.Install
	for _, sc := range cfg.MCP.Servers {
		in, ok, err := sc.Install()
		if err != nil {
			return nil, fmt.Errorf("mcp.servers[%s].package: %w", sc.Name, err)
		}
		if ok {
			out = append(out, in)
		}
	}
	return out, nil
}

// mcpSecrets are the MCP servers' tokens, redacted from tool results like
// every configured secret.
func mcpSecrets(cfg *config.Config, log *slog.Logger) []string {
	var out []string
	for _, sc := range cfg.MCP.Servers {
		tok, err := sc.LoadToken()
		if err != nil {
			log.Warn("an MCP token file cannot be read, so tool results are not redacted of it", "server", sc.Name, "err", err)
			continue
		}
		if tok != "" {
			out = append(out, tok)
		}
	}
	return out
}

// mcpMetrics counts MCP calls and starts per configured server (the only
// label values besides the outcome).
type mcpMetrics struct {
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	starts   *prometheus.CounterVec
}

func newMCPMetrics() *mcpMetrics {
	return &mcpMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "conch_mcp_calls_total",
			Help: "MCP requests by configured server and outcome (ok, tool_error, error)."}, []string{"server", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "conch_mcp_call_seconds",
			Help: "Duration of MCP requests by configured server.", Buckets: prometheus.ExponentialBuckets(0.01, 4, 8)}, []string{"server"}),
		starts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "conch_mcp_server_starts_total",
			Help: "Starts of MCP servers (result: ok, failed; restart: true after a death or failure)."}, []string{"server", "result", "restart"}),
	}
}

// register adds the counters to reg with every configured server's zero
// series, so that a dashboard sees a server before its first call.
func (m *mcpMetrics) register(reg prometheus.Registerer, servers []string) error {
	for _, c := range []prometheus.Collector{m.calls, m.duration, m.starts} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	for _, s := range servers {
		for _, o := range []string{"ok", "tool_error", "error"} {
			m.calls.WithLabelValues(s, o)
		}
	}
	return nil
}

// wireMCP builds the MCP client when servers are configured: its tools
// join each turn (agent.Options.ToolSource), its per-conversation stdio
// servers end with the conversation (a Releaser), /status reports them.
func wireMCP(d *deps) (*mcp.Client, error) {
	if d.mcp != nil || len(d.cfg.MCP.Servers) == 0 {
		return d.mcp, nil
	}
	servers, err := mcpServers(d.cfg)
	if err != nil {
		return nil, err
	}
	m := newMCPMetrics()
	c, err := mcp.New(mcp.Options{
		Servers: servers, Audit: d.audit, Logger: d.log,
		OnCall: func(e mcp.CallEvent) {
			m.calls.WithLabelValues(e.Server, e.Outcome).Inc()
			m.duration.WithLabelValues(e.Server).Observe(e.Duration.Seconds())
		},
		OnStart: func(server string, restart bool, err error) {
			result := "ok"
			if err != nil {
				result = "failed"
			}
			m.starts.WithLabelValues(server, result, fmt.Sprint(restart)).Inc()
		},
	})
	if err != nil {
		return nil, err
	}
	d.mcp, d.mcpMetrics = c, m
	d.closers = append(d.closers, c)
	d.releasers = append(d.releasers, c)
	for _, s := range servers {
		if s.Stdio() && d.runtime == nil {
			d.log.Warn("an MCP stdio server runs only in a sandbox, and there is no container runtime: it is not offered", "server", s.Name)
		}
	}
	return c, nil
}

// registerMCPMetrics puts the MCP counters on /metrics.
func registerMCPMetrics(d *deps, reg prometheus.Registerer) {
	if d.mcpMetrics == nil {
		return
	}
	names := make([]string, 0, len(d.cfg.MCP.Servers))
	for _, s := range d.cfg.MCP.Servers {
		names = append(names, s.Name)
	}
	if err := d.mcpMetrics.register(reg, names); err != nil {
		d.log.Warn("mcp metrics not registered", "err", err)
	}
}

// mcpToolSource is the agent's ToolSource over the client: the turn's
// tool environment gives the conversation and its sandbox.
func mcpToolSource(c *mcp.Client) func(ctx context.Context, env conch.ToolEnv) []conch.Tool {
	return func(ctx context.Context, env conch.ToolEnv) []conch.Tool {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		return c.Tools(ctx, env)
	}
}
