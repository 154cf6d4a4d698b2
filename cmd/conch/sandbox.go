package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"conch/config"
	"conch/sandbox/agent"
)

func (a *app) sandboxAgentCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "sandbox-agent",
		Short:  "Run the in-sandbox agent on standard input and output (started by conch inside each sandbox)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return agent.ServeStdio(cmd.Context())
		},
	}
}

func (a *app) sandboxCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "sandbox", Short: "Manage the sandboxes (one container per conversation)"}
	image := &cobra.Command{Use: "image", Short: "Manage the sandbox image"}
	image.AddCommand(&cobra.Command{
		Use:   "build",
		Short: "Build the sandbox image now (offline when no registry can be reached)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withRuntime(cmd.Context(), func(ctx context.Context, d *deps) error {
				return d.runtime.BuildImage(ctx, func(s string) { fmt.Fprintln(a.stderr, s) })
			})
		},
	})
	cmd.AddCommand(image)
	return cmd
}

// withRuntime runs fn with a connected runtime.
func (a *app) withRuntime(ctx context.Context, fn func(context.Context, *deps) error) error {
	cfg, err := config.Load(a.configPath, os.Environ())
	if err != nil {
		return err
	}
	if cfg.Sandbox.Engine == "none" {
		return fmt.Errorf("sandbox.engine is none: there are no sandboxes")
	}
	d, err := a.build(ctx, cfg, a.stderr)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := a.startRuntime(ctx, d, func(s string) { fmt.Fprintln(a.stderr, s) }); err != nil {
		return err
	}
	if d.runtime == nil {
		return fmt.Errorf("no container engine found: start dockerd or podman, or set sandbox.host")
	}
	return fn(ctx, d)
}
