package terminaltest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"conch"
	"conch/terminal/terminaltest"
)

// ContainerWith gives a hardened sandbox whose image has the real CLIs.
func TestContainerWithAgents(t *testing.T) {
	b := terminaltest.ContainerWith(t, terminaltest.Options{Agents: []string{"claude", "codex", "gemini"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for name, want := range map[string]string{"claude": "Claude Code", "codex": "codex-cli", "gemini": "."} {
		res, err := b.SB.Exec(ctx, conch.ExecRequest{Argv: []string{name, "--version"}, Dir: b.WS})
		if err != nil || res.ExitCode != 0 || !strings.Contains(string(res.Output), want) {
			t.Errorf("%s --version: %v, exit %d, %q", name, err, res.ExitCode, res.Output)
		}
	}
}
