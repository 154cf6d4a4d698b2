// Command mcptestserver serves package mcpserver's test server over stdio.
package main

import (
	"context"
	"log"

	"conch/internal/testenv/mcpserver"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	if err := mcpserver.New(mcpserver.Options{Stdio: true}).Run(context.Background(), &mcpsdk.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
