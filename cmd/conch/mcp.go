package main

import "github.com/spf13/cobra"

// newMCPCmd is `conch mcp`: conch as an MCP server (mcp_server_cmd.go) and
// the MCP servers conch's agent uses (mcp_client_cmd.go).
func newMCPCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "mcp", Short: "Model Context Protocol: conch as an MCP server, and the MCP servers its agent uses"}
	cmd.AddCommand(mcpServerCmds(a)...)
	cmd.AddCommand(mcpClientCmds(a)...)
	return cmd
}
