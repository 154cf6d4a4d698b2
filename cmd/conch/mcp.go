package main

import "github.com/spf13/cobra"

// newMCPCmd is `conch mcp`: conch as an MCP server (mcp_server_cmd.go).
func newMCPCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "mcp", Short: "Model Context Protocol: work in a conversation's computer from an MCP client"}
	cmd.AddCommand(mcpServerCmds(a)...)
	return cmd
}
