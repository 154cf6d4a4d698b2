// Command agentmain is the in-sandbox agent alone, for tests that need a
// static binary to bind-mount into sandboxes before cmd/conch exists or
// without building all of it. It accepts the same `sandbox-agent` argument.
package main

import (
	"context"
	"fmt"
	"os"

	"conch/sandbox/sandboxd"
)

func main() {
	if len(os.Args) != 2 || os.Args[1] != "sandbox-agent" {
		fmt.Fprintln(os.Stderr, "usage: agentmain sandbox-agent")
		os.Exit(2)
	}
	if err := sandboxd.ServeStdio(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-agent:", err)
		os.Exit(1)
	}
}
