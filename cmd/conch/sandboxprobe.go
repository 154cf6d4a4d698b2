package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"conch/sandbox/sandboxd"
)

// sandboxProbeCmd is what `conch doctor` runs in its probe pods on
// Kubernetes (through exec, from the agent volume) to learn whether a pod
// reaches another over the pod network: `listen PORT` prints the pod's
// addresses, then "listening", and greets every connection until its
// standard input ends; `dial HOST:PORT` prints "reached" when it read the
// greeting (exit 0), else what went wrong (exit 3).
func (a *app) sandboxProbeCmd() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:    "sandbox-probe listen PORT | dial HOST:PORT",
		Short:  "Network probe of conch doctor's probe pods (Kubernetes)",
		Hidden: true,
		Args:   cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch args[0] {
			case "listen":
				port, err := strconv.Atoi(args[1])
				if err != nil || port <= 0 || port > 65535 {
					return fmt.Errorf("sandbox-probe listen: port %q", args[1])
				}
				return sandboxd.ProbeListen(cmd.Context(), port, a.stdin, a.stdout)
			case "dial":
				if err := sandboxd.ProbeDial(cmd.Context(), args[1], timeout); err != nil {
					fmt.Fprintln(a.stdout, "unreached:", err)
					return exitError{code: 3}
				}
				fmt.Fprintln(a.stdout, "reached")
				return nil
			}
			return fmt.Errorf("sandbox-probe: %q: want listen or dial", args[0])
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "with dial: give up after this long")
	return cmd
}
