package config

import "fmt"

// MCPServeConfig configures conch as an MCP server: the route /mcp on
// gateway.listen, where an MCP client works in one conversation's computer
// with a token of `conch mcp token CONVERSATION`.
type MCPServeConfig struct {
	// Enabled serves the route (default true; it needs gateway.listen and
	// a container engine, and answers only requests with a valid token).
	Enabled bool `toml:"enabled" env:"ENABLED"`
	// TokenTTL is how long a new token works unless `conch mcp token
	// --expires` says otherwise; 0 means until it is revoked.
	TokenTTL Duration `toml:"token_ttl" env:"TOKEN_TTL"`
}

func (c *Config) validateMCPServe() []Problem {
	var ps []Problem
	if c.MCP.Serve.TokenTTL.D() < 0 {
		ps = append(ps, Problem{"mcp.serve.token_ttl", fmt.Sprintf("%s is negative", c.MCP.Serve.TokenTTL.D()), `set a duration such as "720h", or "0s" for tokens that work until revoked`})
	}
	// The web chat sets up TLS on the HTTP host; without it, tokens would
	// cross the network in plain HTTP.
	if l := c.Gateway.Listen; c.MCP.Serve.Enabled && !c.Web.Enabled && l != "" && !IsLoopback(l) && !c.Web.AllowInsecure {
		ps = append(ps, Problem{"gateway.listen", fmt.Sprintf("%s accepts connections from other machines, but the MCP server would take its tokens over plain HTTP (TLS comes with the web chat, which is off)", l),
			"listen on 127.0.0.1 behind a TLS proxy, or turn the web chat on with web.tls_cert and web.tls_key, or set mcp.serve.enabled = false, or web.allow_insecure = true if the network is trusted"})
	}
	return ps
}
