package coder

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path"
	"strings"
	"time"

	"conch"
	"conch/terminal"
)

func (c *Coder) home(ctx context.Context) (string, error) {
	res, err := c.sb.Exec(ctx, conch.ExecRequest{
		Argv: []string{"sh", "-c", `printf %s "$HOME"`}, Dir: c.s.Workspace(), Env: []string{"LANG=C.UTF-8", "LC_ALL=C.UTF-8"}, Timeout: 30 * time.Second,
	})
	if err != nil {
		return "", fmt.Errorf("coding agent: home: %w", err)
	}
	home := strings.TrimSpace(string(res.Output))
	if res.ExitCode != 0 || !path.IsAbs(home) {
		return "", fmt.Errorf("coding agent: no home directory in the sandbox (%q)", home)
	}
	return home, nil
}

// startCLI writes the profile's files and starts the CLI in the shell,
// then waits for its input box.
func (c *Coder) startCLI(ctx context.Context) error {
	if err := c.writeFiles(ctx); err != nil {
		return err
	}
	envPath, err := c.writeEnv(ctx)
	if err != nil {
		return err
	}
	ws := c.s.Workspace()
	// A leading space keeps the line (and any key in it) out of history.
	line := " cd " + shellQuote(ws) + " && . " + shellQuote(envPath) + " && rm -f " + shellQuote(envPath) + " && " + c.p.Command
	seq, err := c.s.Run(ctx, line)
	c.cliSeq = seq
	if err != nil {
		return fmt.Errorf("coding agent: start: %w", err)
	}
	c.running = true
	sctx, cancel := context.WithTimeout(ctx, c.o.StartTimeout)
	defer cancel()
	var last []string
	err = c.watch(sctx, func(screen []string, s snap) (bool, time.Time, error) {
		last = screen
		if s.DoneSeq > c.cliSeq || s.dead {
			return false, time.Time{}, &AgentError{fmt.Sprintf("the coding agent (%s) exited while starting (status %d); its screen:\n%s", c.p.Name, s.status, c.redact(strings.Join(tailLines(screen, 15), "\n")))}
		}
		return hasAny(screen, c.p.Ready) && !hasAny(screen, c.p.Busy), time.Time{}, nil
	})
	if err != nil {
		if sctx.Err() != nil && ctx.Err() == nil {
			return &AgentError{fmt.Sprintf("the coding agent (%s) did not show its input box within %s; its screen:\n%s", c.p.Name, c.o.StartTimeout, c.redact(strings.Join(tailLines(last, 15), "\n")))}
		}
		return err
	}
	// The start-up screen is not news to the model.
	_, err = c.s.Observe(ctx)
	return err
}

// writeFiles writes the profile's settings files into the sandbox.
func (c *Coder) writeFiles(ctx context.Context) error {
	if c.p.Files == nil {
		return nil
	}
	home, err := c.home(ctx)
	if err != nil {
		return err
	}
	files, err := c.p.Files(Setup{Home: home, Workspace: c.s.Workspace(), Hook: c.s.Hook(c.p.Name), APIKey: c.o.APIKey})
	if err != nil {
		return err
	}
	for _, f := range files {
		if res, err := c.sb.Exec(ctx, conch.ExecRequest{Argv: []string{"mkdir", "-p", path.Dir(f.Path)}, Dir: c.s.Workspace(), Timeout: 30 * time.Second}); err != nil || res.ExitCode != 0 {
			return fmt.Errorf("coding agent: mkdir %s: %v %s", path.Dir(f.Path), err, res.Output)
		}
		if err := c.sb.WriteFile(ctx, f.Path, f.Data, f.Mode); err != nil {
			return fmt.Errorf("coding agent: %w", err)
		}
	}
	return nil
}

// writeEnv writes the CLI's environment (which holds the API key) to a
// private file the shell reads and removes: typed, it would stay on the
// screen, which the model reads. It returns the file's path.
func (c *Coder) writeEnv(ctx context.Context) (string, error) {
	env := c.o.Env
	if c.o.Egress != nil {
		proxy, err := c.o.Egress(ctx, c.key, c.sb)
		if err != nil {
			return "", fmt.Errorf("coding agent: egress: %w", err)
		}
		env = append(env[:len(env):len(env)], "HTTPS_PROXY="+proxy, "https_proxy="+proxy)
	}
	var envFile strings.Builder
	for _, e := range env {
		k, v, ok := strings.Cut(e, "=")
		if !ok || k == "" {
			return "", conch.Errorf(conch.KindInvalid, "coding agent: environment entry %q is not KEY=value", e)
		}
		envFile.WriteString("export " + k + "=" + shellQuote(v) + "\n")
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	envPath := path.Join(c.s.RunDir(), "coder-"+hex.EncodeToString(b)+".env")
	if err := c.sb.WriteFile(ctx, envPath, []byte(envFile.String()), 0o600); err != nil {
		return "", fmt.Errorf("coding agent: %w", err)
	}
	return envPath, nil
}

// snap is a session's event state as the driver's checks read it.
type snap struct {
	terminal.Snapshot
	dead   bool // the pane's program or the control stream ended
	status int
}
