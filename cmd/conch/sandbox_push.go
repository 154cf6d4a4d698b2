package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"conch/sandbox/docker"
)

// sandboxImagePushCmd is `conch sandbox image push REGISTRY`: the images a
// cluster's nodes need, pushed by the local engine, and the config lines
// naming them.
func (a *app) sandboxImagePushCmd() *cobra.Command {
	var agentImage, username string
	var passwordStdin bool
	cmd := &cobra.Command{
		Use:   "push REGISTRY",
		Short: "Push the sandbox image (with the coding CLIs) and conch's own image to a registry, for Kubernetes",
		Long: `Push the images a Kubernetes cluster's nodes need to REGISTRY (a host with an optional path:
registry.example.org/conch, 127.0.0.1:5000) through the local Docker or Podman engine, and print the
conch.toml lines that name them.

Pushed: the image sandboxes use (sandbox.image; with coder.agent set, the image with that CLI, built
first when missing, as on first use; then also its base), and conch's own image (sandbox.kubernetes.agent_image,
or --agent-image) when the engine has it. Each goes as REGISTRY/<name>:<tag>; a "latest" tag becomes
the image id's first 12 hex digits, so nodes never keep an older "latest".

The engine does the push, so its registry settings apply (Docker allows plain HTTP only for
127.0.0.0/8 and its insecure-registries). A login is given with --username and the password on
standard input (--password-stdin); credentials saved by ` + "`docker login`" + ` are not read.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			reg, err := docker.ParseRegistry(args[0])
			if err != nil {
				return err
			}
			auth := docker.RegistryAuth{Username: username}
			switch {
			case passwordStdin && username == "":
				return errors.New("--password-stdin needs --username")
			case username != "" && !passwordStdin:
				return errors.New("--username needs the password on standard input: --password-stdin")
			case passwordStdin:
				b, err := io.ReadAll(io.LimitReader(a.stdin, 64<<10))
				if err != nil {
					return fmt.Errorf("read the password from standard input: %w", err)
				}
				auth.Password = strings.TrimRight(string(b), "\r\n")
				if auth.Password == "" {
					return errors.New("--password-stdin: standard input was empty")
				}
			}
			return a.sandboxImagePush(cmd.Context(), reg, agentImage, cmd.Flags().Changed("agent-image"), auth)
		},
	}
	cmd.Flags().StringVar(&agentImage, "agent-image", "", "conch's own image to push (default: sandbox.kubernetes.agent_image)")
	cmd.Flags().StringVar(&username, "username", "", "registry user (the password on standard input with --password-stdin)")
	cmd.Flags().BoolVar(&passwordStdin, "password-stdin", false, "read the registry password from standard input")
	return cmd
}

func (a *app) sandboxImagePush(ctx context.Context, reg, agentImage string, agentSet bool, auth docker.RegistryAuth) error {
	cfg, err := a.loadOperatorConfig()
	if err != nil {
		return err
	}
	if cfg.Sandbox.Engine == "none" {
		return errors.New("sandbox.engine is none: no engine to push from")
	}
	if !agentSet {
		agentImage = cfg.Sandbox.Kubernetes.AgentImage
	}
	// The local engine, whatever sandbox.backend says: images are built
	// and pushed where an engine is. The instance id only labels a build's
	// passing container; none is created (a data dir conch never ran in
	// stays unused: its first start must not take it for a lost store).
	instance := cfg.InstanceID
	if instance == "" {
		if b, err := os.ReadFile(filepath.Join(cfg.DataDir, "instance-id")); err == nil {
			instance = strings.TrimSpace(string(b))
		}
	}
	if instance == "" {
		instance = "image-push"
	}
	opts, err := sandboxOptions(cfg, instance)
	if err != nil {
		return err
	}
	if opts.Installs, err = mcpInstalls(cfg); err != nil {
		return err
	}
	// Nothing of the runtime's own goes into the data dir (no agent binary,
	// sockets or registry: no sandbox is made); the caches stay shared.
	if opts.CacheDir == "" {
		opts.CacheDir = filepath.Join(cfg.DataDir, "cache")
	}
	tmp, err := os.MkdirTemp("", "conch-image-push-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	opts.DataDir, opts.SandboxdBinary = tmp, ""
	progress := func(s string) { fmt.Fprintln(a.stderr, s) }
	opts.Disk, opts.DiskAuto = 0, false // no workspace is made; a cluster's size is no engine's
	opts.IdleStop, opts.Retention, opts.WarmPool = 0, 0, 0
	opts.BuildProgress = progress
	opts.Logger = slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	rt, err := docker.New(ctx, opts)
	if err != nil {
		return fmt.Errorf("sandbox image push: %w", err)
	}
	defer rt.Close()
	imgs, notes, err := rt.ImagesToPush(ctx, reg, agentImage, progress)
	if err != nil {
		return fmt.Errorf("sandbox image push: %w", err)
	}
	for i, img := range imgs {
		progress(fmt.Sprintf("pushing %s as %s", img.Source, img.Target))
		if imgs[i], err = rt.Push(ctx, img, auth, progress); err != nil {
			return fmt.Errorf("sandbox image push: %w", err)
		}
		progress(fmt.Sprintf("pushed %s (%s)", imgs[i].Target, imgs[i].Digest))
	}
	for _, n := range notes {
		progress("note: " + n)
	}
	writePushTOML(a.stdout, reg, cfg.Coder.Agent, imgs)
	return nil
}

// writePushTOML prints the config lines naming the pushed images.
func writePushTOML(w io.Writer, reg, coder string, imgs []docker.PushImage) {
	by := map[string]docker.PushImage{}
	for _, img := range imgs {
		by[img.Role] = img
	}
	fmt.Fprintf(w, "# conch.toml for sandbox.backend = \"kubernetes\", images in %s\n[sandbox]\n", reg)
	sb := by[docker.RoleSandbox]
	line := fmt.Sprintf("image = %q", sb.Target)
	if len(sb.Agents) > 0 {
		var as []string
		for _, n := range slices.Sorted(maps.Keys(sb.Agents)) {
			as = append(as, n+" "+sb.Agents[n])
		}
		line += "  # with " + strings.Join(as, ", ")
		if coder != "" {
			line += fmt.Sprintf(" (coder.agent = %q)", coder)
		}
	}
	fmt.Fprintln(w, line)
	if base, ok := by[docker.RoleSandboxBase]; ok {
		fmt.Fprintf(w, "# without the coding CLIs: %q\n", base.Target)
	}
	fmt.Fprintln(w, "\n[sandbox.kubernetes]")
	if ag, ok := by[docker.RoleAgent]; ok {
		fmt.Fprintf(w, "agent_image = %q\n", ag.Target)
	} else {
		fmt.Fprintln(w, "# agent_image: conch's own image was not pushed (see the note above)")
	}
}
