package main

import "github.com/spf13/cobra"

// newMCPCmd is `conch mcp`: the MCP servers conch uses (mcp_client_cmd.go).
func newMCPCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Model Context Protocol: the servers whose tools the agent uses",
	}
	cmd.AddCommand(mcpClientCmds(a)...)
	return cmd
}
