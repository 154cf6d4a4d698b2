package config

// MCPConfig configures the Model Context Protocol: conch as an MCP server
// (Serve; the MCP servers conch's agent uses are configured beside it).
type MCPConfig struct {
	Serve MCPServeConfig `toml:"serve" envPrefix:"SERVE_"`
}
