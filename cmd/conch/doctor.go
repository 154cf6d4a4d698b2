package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"conch/channel/matrix"
	"conch/config"
	"conch/sandbox/docker"
)

func (a *app) doctorCmd() *cobra.Command {
	var offline bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the configuration, data dir, model endpoint and container engine",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if n := a.doctor(cmd.Context(), offline); n > 0 {
				fmt.Fprintf(a.stdout, "\n%d problem(s) found.\n", n)
				return exitError{code: 1}
			}
			fmt.Fprintln(a.stdout, "\nAll checks passed.")
			return nil
		},
	}
	cmd.Flags().BoolVar(&offline, "offline", false, "check only what is on this machine (config, data dir, container engine): no model or channel is contacted, and no model needs to be configured")
	return cmd
}

// doctor prints one line per check and returns the number of failures.
// offline leaves out everything that talks to the network.
func (a *app) doctor(ctx context.Context, offline bool) int {
	failures := 0
	check := func(name string, err error, ok string) {
		if err != nil {
			failures++
			fmt.Fprintf(a.stdout, "✗ %s: %s\n", name, strings.ReplaceAll(err.Error(), "\n", "\n    "))
			return
		}
		fmt.Fprintf(a.stdout, "✓ %s: %s\n", name, ok)
	}
	cfg, err := a.loadOperatorConfig()
	if err != nil {
		check("config", err, "")
		return failures
	}
	src := "embedded defaults and environment"
	if cfg.File != "" {
		src = cfg.File
	}
	if offline {
		fmt.Fprintf(a.stdout, "✓ config: read (%s); not validated for a model (--offline)\n", src)
	} else {
		check("config", cfg.Validate(), "valid ("+src+")")
	}

	check("data dir", checkDataDir(ctx, cfg.DataDir), cfg.DataDir+" is writable, store opens")
	if offline {
		fmt.Fprintln(a.stdout, "- model and channels: not contacted (--offline)")
		a.doctorEngine(ctx, cfg, check)
		return failures
	}

	if cfg.Model.Provider != "" && cfg.Model.Name != "" {
		check("model endpoint", checkModel(ctx, cfg.Model), fmt.Sprintf("%s answers for %s", cfg.Model.Provider, cfg.Model.Name))
		check("pictures", nil, visionLine(cfg))
	}

	if cfg.Matrix.Enabled() {
		a.doctorMatrix(ctx, cfg, check)
	}
	if cfg.Telegram.Enabled() {
		a.doctorTelegram(ctx, cfg, check)
	}
	if cfg.Slack.Enabled() {
		a.doctorSlack(ctx, cfg, check)
	}
	if cfg.Discord.Enabled() {
		a.doctorDiscord(ctx, cfg, check)
	}
	if cfg.Email.Enabled() {
		a.doctorEmail(ctx, cfg, check)
	}
	a.doctorMCP(ctx, cfg, check)

	a.doctorEngine(ctx, cfg, check)
	return failures
}

// doctorEngine checks the sandbox backend: the container engine and the
// coding CLIs' images, or the Kubernetes API server and permissions.
func (a *app) doctorEngine(ctx context.Context, cfg *config.Config, check func(string, error, string)) {
	switch {
	case cfg.Sandbox.Engine == "none":
		fmt.Fprintln(a.stdout, "- container engine: disabled (sandbox.engine = none)")
	case cfg.Sandbox.BackendName() == config.BackendKubernetes:
		a.doctorKubernetes(ctx, cfg, check) // kubernetes.go
	default:
		host, err := docker.DetectHost(cfg.Sandbox.Host, cfg.Sandbox.Engine, os.Getenv)
		if err == nil {
			var info docker.Info
			info, err = docker.Probe(ctx, host, cfg.Sandbox.Engine)
			check("container engine", err, fmt.Sprintf("%s %s at %s (API %s)", info.Engine, info.Version, info.Host, info.APIVersion))
			if err == nil {
				a.doctorAgents(ctx, cfg, check)
			}
		} else {
			check("container engine", err, "")
		}
	}
}

// doctorMatrix checks the Matrix login and reports rooms whose messages
// could not be decrypted.
func (a *app) doctorMatrix(ctx context.Context, cfg *config.Config, check func(string, error, string)) {
	mc := cfg.Matrix
	if err := mc.LoadSecrets(); err != nil {
		check("matrix login", err, "")
		return
	}
	if mc.AccessToken != "" {
		check("matrix login", matrix.CheckLogin(ctx, mc.Homeserver, mc.UserID, mc.AccessToken), mc.UserID+" at "+mc.Homeserver)
	}
	db, err := openDataStore(ctx, cfg.DataDir, io.Discard)
	if err != nil {
		return // reported by the data dir check
	}
	defer db.Close()
	if !matrix.E2EEAvailable() {
		// Encrypted rooms are kept waiting, not served: a build to fix.
		check("matrix encryption", errors.New("this conch was built with -tags noe2ee, so it cannot read or answer encrypted rooms "+
			"(their messages are kept until it can); build it without that tag (`make build` or `go build ./cmd/conch`)"), "")
		return
	}
	rooms, err := matrix.Undecryptable(ctx, db.SQL())
	if err == nil && len(rooms) > 0 {
		var parts []string
		for room, n := range rooms {
			parts = append(parts, fmt.Sprintf("%s (%d)", room, n))
		}
		slices.Sort(parts)
		err = fmt.Errorf("messages waiting for room keys in %s: the senders' devices have not shared their keys with conch's device; ask them to re-send, or verify conch's device", strings.Join(parts, ", "))
	}
	check("matrix encryption", err, "no undecryptable messages")
}

func checkDataDir(ctx context.Context, dir string) error {
	if err := prepareDataDir(dir, false); err != nil {
		return err
	}
	probe := filepath.Join(dir, ".doctor")
	if err := os.WriteFile(probe, []byte("ok"), 0o600); err != nil {
		return fmt.Errorf("%s is not writable: %w", dir, err)
	}
	os.Remove(probe)
	db, err := openDataStore(ctx, dir, io.Discard)
	if err != nil {
		return err
	}
	return db.Close()
}

// checkModel asks the provider's model list endpoint, which costs no tokens,
// and reports whether the key is accepted.
func checkModel(ctx context.Context, m config.ModelConfig) error {
	_, err := listModels(ctx, m)
	return err
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// doctorAgents reports the coding-agent CLIs of the image new sandboxes
// use; a configured coder.agent whose CLI the image lacks is a failure with
// the fix (the code tool would fail with "command not found").
func (a *app) doctorAgents(ctx context.Context, cfg *config.Config, check func(string, error, string)) {
	opts, err := sandboxOptions(cfg, "doctor")
	if err == nil {
		var rep docker.AgentsReport
		rep, err = docker.ProbeAgents(ctx, opts)
		if err == nil {
			err = agentsProblem(rep)
			check("coding agent CLIs", err, describeAgents(rep))
			return
		}
	}
	check("coding agent CLIs", err, "")
}

func describeAgents(rep docker.AgentsReport) string {
	var have []string
	for _, name := range slices.Sorted(maps.Keys(rep.Agents)) {
		have = append(have, name+" "+rep.Agents[name])
	}
	if len(have) == 0 {
		return "none in " + rep.Image + " (set coder.agent to add one)"
	}
	return strings.Join(have, ", ") + " in " + rep.Image
}

// agentsProblem says what is missing for the configured agents, with the fix.
func agentsProblem(rep docker.AgentsReport) error {
	var missing []string
	for _, name := range slices.Sorted(maps.Keys(rep.Want)) {
		if rep.Agents[name] != rep.Want[name] {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	why := "the sandbox image " + rep.Image + " does not have it"
	if !rep.Built {
		why = "the sandbox image with it (" + rep.Image + ") is not built yet"
	}
	return fmt.Errorf("coder.agent %s: %s, so the code tool would fail with \"command not found\"; run `conch sandbox image build --agents %s` "+
		"(conch up also builds it at its first start; it downloads the pinned CLI from the npm registry, or CONCH_NPM_REGISTRY)",
		strings.Join(missing, ", "), why, strings.Join(missing, ","))
}
