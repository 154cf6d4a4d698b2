package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"conch/internal/systemd"
)

// serviceName is the systemd unit conch installs.
const serviceName = "conch.service"

// systemctlFunc runs systemctl with args and returns its combined output.
type systemctlFunc func(ctx context.Context, args ...string) ([]byte, error)

func execSystemctl(ctx context.Context, args ...string) ([]byte, error) {
	return exec.CommandContext(ctx, "systemctl", args...).CombinedOutput()
}

// unitPath is where the unit goes: the user's systemd directory or
// /etc/systemd/system.
func unitPath(userUnit bool) (string, error) {
	if !userUnit {
		return filepath.Join("/etc/systemd/system", serviceName), nil
	}
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "systemd", "user", serviceName), nil
}

func (a *app) serviceCmd() *cobra.Command {
	return a.serviceCmdWith(execSystemctl, unitPath)
}

// serviceCmdWith is serviceCmd with systemctl and the unit location
// replaceable (tests need neither systemd nor root).
func (a *app) serviceCmdWith(systemctl systemctlFunc, where func(bool) (string, error)) *cobra.Command {
	cmd := &cobra.Command{Use: "service", Short: "Run `conch up` as a systemd service"}
	sc := &serviceCmds{a: a, systemctl: systemctl, where: where}
	var noStart bool
	var envFile string
	install := &cobra.Command{
		Use:   "install",
		Short: "Write, enable and start a systemd unit for `conch up` (restart on failure)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return sc.install(cmd.Context(), noStart, envFile)
		},
	}
	install.Flags().BoolVar(&noStart, "no-start", false, "enable the unit but do not start it now")
	install.Flags().StringVar(&envFile, "env-file", "", "environment file for secrets (default <config dir>/conch.env)")
	status := &cobra.Command{
		Use:   "status",
		Short: "Show the service's state",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return sc.status(cmd.Context()) },
	}
	uninstall := &cobra.Command{
		Use:   "uninstall",
		Short: "Stop and disable the service and remove its unit (data stays)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return sc.uninstall(cmd.Context()) },
	}
	cmd.PersistentFlags().BoolVar(&sc.userUnit, "user", false, "a unit of your own user (systemctl --user) instead of a system unit")
	cmd.AddCommand(install, status, uninstall)
	return cmd
}

// serviceCmds is what the service subcommands share: how to run systemctl,
// where the unit file goes and the --user flag.
type serviceCmds struct {
	a         *app
	systemctl systemctlFunc
	where     func(bool) (string, error)
	userUnit  bool
}

// sysArgs prefixes systemctl arguments with --user for a user unit.
func (sc *serviceCmds) sysArgs(args ...string) []string {
	if sc.userUnit {
		return append([]string{"--user"}, args...)
	}
	return args
}

// unitOptions checks the configuration and fills in the unit's options:
// the binary, data dir, config file, environment file and the user to run as.
func (sc *serviceCmds) unitOptions(envFile string) (systemd.Options, error) {
	cfg, err := sc.a.loadConfig()
	if err != nil {
		return systemd.Options{}, fmt.Errorf("%w\n(conch service install checks the configuration first: the service would fail the same way)", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return systemd.Options{}, fmt.Errorf("find the conch binary: %w", err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return systemd.Options{}, fmt.Errorf("find the conch binary: %w", err)
	}
	o := systemd.Options{User: sc.userUnit, Exe: exe, DataDir: cfg.DataDir, EnvFile: envFile}
	if cfg.File != "" {
		o.Config, _ = filepath.Abs(cfg.File)
	}
	if o.EnvFile == "" {
		o.EnvFile = sc.a.envFilePath()
	}
	if !sc.userUnit {
		if u, err := user.Current(); err == nil && u.Uid != "0" {
			o.RunAs = u.Username
		}
	}
	return o, nil
}

// install is conch service install: write the unit, enable it and (unless
// noStart) start it.
func (sc *serviceCmds) install(ctx context.Context, noStart bool, envFile string) error {
	o, err := sc.unitOptions(envFile)
	if err != nil {
		return err
	}
	path, err := sc.where(sc.userUnit)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("service install: %w", err)
	}
	if err := os.WriteFile(path, []byte(systemd.Unit(o)), 0o644); err != nil {
		if errors.Is(err, os.ErrPermission) && !sc.userUnit {
			return fmt.Errorf("service install: %w (run it as root, or use --user for a unit of your own)", err)
		}
		return fmt.Errorf("service install: %w", err)
	}
	fmt.Fprintln(sc.a.stdout, "wrote", path)
	steps := [][]string{sc.sysArgs("daemon-reload")}
	if noStart {
		steps = append(steps, sc.sysArgs("enable", serviceName))
	} else {
		steps = append(steps, sc.sysArgs("enable", "--now", serviceName))
	}
	for _, s := range steps {
		if out, err := sc.systemctl(ctx, s...); err != nil {
			return fmt.Errorf("systemctl %s: %w: %s", strings.Join(s, " "), err, bytes.TrimSpace(out))
		}
	}
	fmt.Fprintf(sc.a.stdout, "enabled %s. Secrets go in %s (KEY=value lines, mode 600).\n", serviceName, o.EnvFile)
	if sc.userUnit {
		fmt.Fprintln(sc.a.stdout, "To keep it running while you are logged out: loginctl enable-linger $USER")
	}
	fmt.Fprintln(sc.a.stdout, "Log in: conch web url; logs: journalctl "+strings.Join(sc.sysArgs("-u", serviceName), " "))
	return nil
}

// status is conch service status: systemctl status, with its exit code.
func (sc *serviceCmds) status(ctx context.Context) error {
	path, err := sc.where(sc.userUnit)
	if err != nil {
		return err
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("no conch service is installed (%s): run conch service install%s", path, map[bool]string{true: " --user", false: ""}[sc.userUnit])
	}
	out, err := sc.systemctl(ctx, sc.sysArgs("status", "--no-pager", "--lines=20", serviceName)...)
	sc.a.stdout.Write(out)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return exitError{code: ee.ExitCode()} // systemctl's own code: 3 = not running
	}
	return err
}

// uninstall is conch service uninstall: stop and disable the service and
// remove its unit; the data directory stays.
func (sc *serviceCmds) uninstall(ctx context.Context) error {
	path, err := sc.where(sc.userUnit)
	if err != nil {
		return err
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintln(sc.a.stdout, "no conch service is installed")
		return nil
	}
	if out, err := sc.systemctl(ctx, sc.sysArgs("disable", "--now", serviceName)...); err != nil {
		return fmt.Errorf("systemctl disable: %w: %s", err, bytes.TrimSpace(out))
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("service uninstall: %w", err)
	}
	if out, err := sc.systemctl(ctx, sc.sysArgs("daemon-reload")...); err != nil {
		return fmt.Errorf("systemctl daemon-reload: %w: %s", err, bytes.TrimSpace(out))
	}
	fmt.Fprintln(sc.a.stdout, "removed", path, "(the data directory is kept)")
	return nil
}
