package config

// MCPConfig configures the Model Context Protocol: conch as an MCP server
// (Serve; the MCP servers conch's agent uses are configured beside it).
type MCPConfig struct {
	Serve MCPServeConfig `toml:"serve" envPrefix:"SERVE_"`
	// Servers are the MCP servers whose tools the agent is offered
	// ([[mcp.servers]]; mcp_client.go).
	Servers []MCPServerConfig `toml:"servers" env:"-"`
}
