package coder

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"slices"
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

// startCLI ends what an earlier run of the CLI left behind, writes the
// profile's files and starts the CLI in the shell (with resume, continuing
// its last session), then waits until it takes input. It reports whether
// the CLI resumed its session: when it cannot, it starts afresh.
func (c *Coder) startCLI(ctx context.Context, resume bool) (resumed bool, err error) {
	if c.o.Ask && c.p.NoAsk != "" {
		return false, &AgentError{fmt.Sprintf("the coding agent (%s) cannot run with approvals = ask: %s; use approvals = auto", c.p.Name, c.p.NoAsk)}
	}
	resume = resume && c.p.ResumeArgs != ""
	if err := c.toShell(ctx); err != nil {
		return false, err
	}
	base := ""
	if c.o.Route != nil {
		if base, err = c.o.Route(ctx, c.key, c.sb); err != nil {
			return false, fmt.Errorf("coding agent: route to its API: %w", err)
		}
	}
	if err := c.writeFiles(ctx, base); err != nil {
		return false, err
	}
	c.resumeErr = ""
	err = c.launch(ctx, base, resume)
	var agentErr *AgentError
	if resume && errors.As(err, &agentErr) && ctx.Err() == nil {
		// No session to continue (or it would not load): start afresh.
		c.resumeErr, _, _ = strings.Cut(agentErr.Msg, "\n")
		// A CLI that did not become ready may still run: the fresh
		// start must reach the shell, not the CLI's input.
		if err := c.toShell(ctx); err != nil {
			return false, err
		}
		return false, c.launch(ctx, base, false)
	}
	return resume && err == nil, err
}

// launch types the CLI's command line into the shell and waits until the
// CLI takes input.
func (c *Coder) launch(ctx context.Context, base string, resume bool) error {
	envPath, err := c.writeEnv(ctx, base)
	if err != nil {
		return err
	}
	cmd := c.p.CommandLine(!c.o.Ask, resume)
	ws := c.s.Workspace()
	// A leading space keeps the line out of history.
	line := " cd " + shellQuote(ws) + " && . " + shellQuote(envPath) + " && rm -f " + shellQuote(envPath) + " && " + cmd
	seq, err := c.s.Run(ctx, line)
	c.cliSeq, c.launched = seq, true
	if err != nil {
		return fmt.Errorf("coding agent: start: %w", err)
	}
	c.running = true
	sctx, cancel := context.WithTimeout(ctx, c.o.StartTimeout)
	defer cancel()
	var last []string
	var waiting string
	err = c.watch(sctx, func(screen []string, s snap) (bool, time.Time, error) {
		last = screen
		if s.DoneSeq > c.cliSeq || s.dead {
			c.running = false
			return false, time.Time{}, &AgentError{fmt.Sprintf("the coding agent (%s) exited while starting (status %d); its screen:\n%s", c.p.Name, s.status, c.redact(strings.Join(tailLines(screen, 15), "\n")))}
		}
		ok, at, why := c.takesInput(screen, s, resume)
		waiting = why
		return ok, at, nil
	})
	if err != nil {
		if sctx.Err() != nil && ctx.Err() == nil {
			return &AgentError{fmt.Sprintf("the coding agent (%s) did not become ready within %s (%s); its screen:\n%s", c.p.Name, c.o.StartTimeout, waiting, c.redact(strings.Join(tailLines(last, 15), "\n")))}
		}
		return err
	}
	// The start-up screen is not news to the model.
	_, err = c.s.Observe(ctx)
	return err
}

// toShell ends what a run of the CLI left (or a start that was given up)
// and waits for conch's shell to be back at its prompt.
func (c *Coder) toShell(ctx context.Context) error {
	if err := c.endHelpers(ctx); err != nil {
		return err
	}
	return c.awaitPrompt(ctx)
}

// awaitPrompt waits until conch's shell is back at its prompt after the
// CLI ended (its prompt marker can come after tmux already names the shell
// as the pane's program; a later one would be taken for the next start's
// exit), ending the CLI's processes if it still runs.
func (c *Coder) awaitPrompt(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := c.watch(wctx, func(_ []string, s snap) (bool, time.Time, error) {
			return !c.launched || s.DoneSeq > c.cliSeq || s.dead, time.Time{}, nil
		})
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		cur, cerr := c.s.Command(ctx)
		if cerr != nil {
			return fmt.Errorf("coding agent: %w", cerr)
		}
		if err == nil && isShell(cur) {
			c.launched = false
			return nil
		}
		if attempt == 2 {
			return &AgentError{fmt.Sprintf("the shell did not come back after the coding agent (%s) ended (the pane runs %q)", c.p.Name, cur)}
		}
		if err := c.endHelpers(ctx); err != nil {
			return err
		}
	}
}

// readyQuiet is how long a started CLI's screen must be quiet, showing its
// input box, before the first text is sent; resumeQuiet when it continues
// a session, which it may still be loading (and drawing) after its input
// is on (Gemini CLI).
const (
	readyQuiet  = 400 * time.Millisecond
	resumeQuiet = 2 * time.Second
)

// takesInput is the start's check: the CLI's own signals (its session-start
// hook ran; it switched bracketed paste on after it started) and then its
// input box, not busy, on a quiet screen. Text sent earlier is lost (a CLI
// still initializing drops it, or takes a pasted "?" as a key). It returns
// what it still waits for.
func (c *Coder) takesInput(screen []string, s snap, resume bool) (bool, time.Time, string) {
	switch {
	case c.p.ReadyHook && s.ReadySeq <= c.cliSeq:
		return false, time.Time{}, "its session-start hook has not run"
	case c.p.ReadyPaste && (!s.PasteOn || s.PasteSeq <= c.cliSeq):
		return false, time.Time{}, "it has not switched bracketed paste on"
	case !hasAny(screen, c.p.Ready) || hasAny(screen, c.p.Busy):
		return false, time.Time{}, "its input box is not shown"
	}
	need := readyQuiet
	if resume {
		need = resumeQuiet
	}
	if quiet := c.o.Now().Sub(s.LastOutput); quiet < need {
		return false, s.LastOutput.Add(need), "its screen is not quiet"
	}
	return true, time.Time{}, ""
}

// agentEnv marks every process of the CLI (and whatever it starts), so
// that what outlives the CLI can be found and ended.
const agentEnv = "CONCH_AGENT"

// Mark is the environment entry every process of the CLI name run by the
// terminals whose conch directory is runDir carries: unique per sandbox
// (and per terminal Manager where several share one machine, as tests on
// the host do), the same after a restart of conch.
func Mark(name, runDir string) string { return agentEnv + "=" + name + "@" + runDir }

func (c *Coder) mark() string { return Mark(c.p.Name, c.s.RunDir()) }

// endHelpers ends the processes a previous run of the CLI left behind
// (helpers and daemons that outlived it): every process whose environment
// carries the CLI's mark. The CLI itself is not running when this is
// called.
func (c *Coder) endHelpers(ctx context.Context) error {
	// grep -z reads each environ file as NUL-separated entries; one grep
	// for all processes, a few rounds for what they start meanwhile.
	script := `for round in 1 2 3; do
	pids=$(grep -lxzF "$1" /proc/[0-9]*/environ 2>/dev/null | sed -n 's|^/proc/\([0-9]*\)/environ$|\1|p' | grep -vx "$$")
	[ -z "$pids" ] && exit 0
	kill -9 $pids 2>/dev/null
done
exit 0`
	res, err := c.sb.Exec(ctx, conch.ExecRequest{
		Argv: []string{"sh", "-c", script, "end-helpers", c.mark()}, Dir: c.s.Workspace(), Timeout: 30 * time.Second,
	})
	if err != nil {
		return fmt.Errorf("coding agent: end earlier helpers: %w", err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("coding agent: end earlier helpers: exit %d: %s", res.ExitCode, res.Output)
	}
	return nil
}

// writeFiles writes the profile's settings files into the sandbox.
func (c *Coder) writeFiles(ctx context.Context, base string) error {
	if c.p.Files == nil {
		return nil
	}
	home, err := c.home(ctx)
	if err != nil {
		return err
	}
	files, err := c.p.Files(Setup{
		Home: home, Workspace: c.s.Workspace(), Hook: c.s.Hook(c.p.Name), ReadyHook: c.s.ReadyHook(c.p.Name),
		APIKey: c.o.APIKey, BaseURL: base, Ask: c.o.Ask,
	})
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

// writeEnv writes the CLI's environment to a private file the shell reads
// and removes: typed, it would stay on the screen, which the model reads.
// It returns the file's path.
func (c *Coder) writeEnv(ctx context.Context, base string) (string, error) {
	env := slices.Concat(c.o.Env, c.p.Env, []string{c.mark()})
	if base != "" && c.p.BaseURLEnv != "" {
		env = append(env, c.p.BaseURLEnv+"="+base)
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
