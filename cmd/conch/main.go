// Command conch is the conch gateway: every conversation gets its own computer.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	// Unless an operator turns on metrics.pprof (servePprof samples again),
	// conch serves no heap profile, so the runtime's sampling of
	// allocations only costs memory: its bucket table held 1.4 MB after 20
	// conversations (BenchmarkIdleRSS; runtime/metrics
	// /memory/classes/profiling/buckets). Docs: decision 2026-11-26-idle-trim.
	runtime.MemProfileRate = 0
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd(os.Stdin, os.Stdout, os.Stderr).ExecuteContext(ctx)
	stop()
	if err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "conch:", err)
		os.Exit(1)
	}
}

// exitError ends the process with a code, its message already printed.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// app holds what every command shares.
type app struct {
	configPath string
	// newStore lets a gateway start with an empty store in a used data dir.
	newStore bool
	stdin    io.Reader
	stdout   io.Writer
	stderr   io.Writer
}

func newRootCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:           "conch",
		Short:         "A gateway that gives every conversation its own computer",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVar(&a.configPath, "config", "", "config file (default $XDG_CONFIG_HOME/conch/conch.toml)")
	root.AddCommand(
		a.upCmd(),
		a.chatCmd(),
		a.doctorCmd(),
		a.memoryCmd(),
		a.sandboxCmd(),
		a.sandboxAgentCmd(),
		a.sandboxInitCmd(),  // process 1 of a Kubernetes sandbox pod (sandboxinit.go)
		a.sandboxProbeCmd(), // conch doctor's network probe in its probe pods (sandboxprobe.go)
		a.configCmd(),
		a.backupCmd(),
		a.restoreCmd(),
		a.pairingCmd(),
		a.skillsCmd(),
		a.transcriptCmd(),
		a.schedulesCmd(),
		a.usageCmd(),
		a.webCmd(),     // web chat login (web.go)
		a.serviceCmd(), // systemd unit (service.go)
		newMCPCmd(a),   // MCP (mcp.go)
		a.versionCmd(), // version.go
		a.initCmd(),    // initcmd.go
	)
	return root
}
