package coder

import (
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"

	"conch"
	"conch/internal/backoff"
	"conch/terminal"
)

// sendAndWait types text (through a file when long), presses Enter until
// the CLI takes it, and waits for the turn. newTask: text is a task (not
// an answer to the CLI), so the files it changes are counted from now.
func (c *Coder) sendAndWait(ctx context.Context, text string, newTask bool, progress func(string)) (TurnResult, error) {
	var res TurnResult
	// The previous answer is cleared and the workspace's files listed
	// while the text is typed: both must be done before Enter, the
	// earliest the CLI can begin.
	begun := make(chan struct{})
	go func() { defer close(begun); c.beginTurn(ctx, newTask) }()
	defer func() { <-begun }()
	if len(text) > c.o.IPCThreshold || strings.ContainsAny(text, "\n\r") {
		file, err := c.writeTask(ctx, text)
		if err != nil {
			return res, err
		}
		res.IPCFile = file
		text = fmt.Sprintf("Read the task in %s and do it.", file)
	}
	// Make everything on the screen seen, so the result is what follows.
	if _, err := c.s.Observe(ctx); err != nil {
		return res, err
	}
	start := c.seq()
	input := c.s.Type
	if c.p.Paste {
		input = c.s.Paste
	}
	typed := c.o.Now()
	if err := input(ctx, text); err != nil {
		return res, fmt.Errorf("coding agent: type: %w", err)
	}
	var resend func() error
	if newTask {
		// Only a task: an answer to a menu is taken without ever showing.
		resend = func() error {
			typed = c.o.Now()
			return input(ctx, text)
		}
	}
	if err := c.awaitShown(ctx, text, start, resend); err != nil {
		return res, err
	}
	// Enter comes EnterDelay after the text, however long it took to show.
	if err := backoff.Sleep(ctx, typed.Add(c.p.enterDelay()).Sub(c.o.Now())); err != nil {
		return res, err
	}
	<-begun
	if err := c.pressEnter(ctx, text, start); err != nil {
		return res, err
	}
	tr, err := c.waitTurn(ctx, start, progress)
	tr.IPCFile = res.IPCFile
	return tr, err
}

// writeTask writes a long task to a file in the workspace.
func (c *Coder) writeTask(ctx context.Context, text string) (string, error) {
	ws := c.s.Workspace()
	file := path.Join(ws, ".ipc", fmt.Sprintf("task-%s.md", c.o.Now().UTC().Format("20060102T150405.000")))
	if r, err := c.sb.Exec(ctx, conch.ExecRequest{Argv: []string{"mkdir", "-p", path.Dir(file)}, Dir: ws, Timeout: 30 * time.Second}); err != nil || r.ExitCode != 0 {
		return "", fmt.Errorf("coding agent: mkdir .ipc: %v %s", err, r.Output)
	}
	if err := c.sb.WriteFile(ctx, file, []byte(text), 0o644); err != nil {
		return "", fmt.Errorf("coding agent: %w", err)
	}
	return file, nil
}

// probes are the parts of text looked for in the input box: its start,
// and its end (nearer the foot of the box when the text wraps).
func probes(text string) []string {
	r := []rune(strings.TrimSpace(text))
	if len(r) <= 24 {
		return []string{string(r)}
	}
	return []string{string(r[:24]), string(r[len(r)-12:])}
}

// inInput reports whether the input box, at the foot of screen, shows one
// of probes.
func inInput(screen []string, probes []string) bool {
	return hasAny([]string{strings.Join(tailLines(screen, 6), "\n")}, probes)
}

// Typed text lost: when the screen stays quiet this long after a task was
// sent without showing it, while the input box shows its placeholder
// (Profile.Empty), the CLI dropped it and it is sent again, up to
// maxResends times; shownWait bounds the wait for the text to show.
const (
	lostQuiet  = 1500 * time.Millisecond
	maxResends = 2
	shownWait  = 10 * time.Second
)

// awaitShown waits for the typed text to show in the input box: its
// disappearance can only mean the CLI took it once it was there, and under
// load the screen may not show it yet. A CLI that was not ready after all
// (Gemini CLI loading a resumed session) drops it without a trace: then,
// for a CLI whose empty input box can be told (Profile.Empty), resend (nil
// for an answer to the CLI) sends it again. Anything that says the CLI
// took it (its hook, its end, a question, busy) ends the wait.
func (c *Coder) awaitShown(ctx context.Context, text string, start uint64, resend func() error) error {
	pr := probes(text)
	if len(c.p.Empty) == 0 || resend == nil {
		// Only wait a little for the text to show.
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_ = c.watch(wctx, func(screen []string, _ snap) (bool, time.Time, error) {
			return inInput(screen, pr), time.Time{}, nil
		})
		return ctx.Err()
	}
	for resends := 0; ; resends++ {
		sent := c.o.Now()
		lost := false
		wctx, cancel := context.WithTimeout(ctx, shownWait)
		err := c.watch(wctx, func(screen []string, s snap) (bool, time.Time, error) {
			switch {
			case inInput(screen, pr), s.TurnSeq > start, s.dead, hasAny(screen, c.p.Asking):
				return true, time.Time{}, nil
			case hasAny(screen, c.p.Busy):
				return false, time.Time{}, nil // working, or still loading: look at its next output
			}
			since := s.LastOutput
			if since.Before(sent) {
				since = sent
			}
			if c.o.Now().Sub(since) < lostQuiet {
				return false, since.Add(lostQuiet), nil
			}
			// Quiet, and the text is not in the box: lost if the box is
			// empty (else it shows the text where the probes miss it).
			lost = hasAny(tailLines(screen, 6), c.p.Empty)
			return true, time.Time{}, nil
		})
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil && !errors.Is(err, context.DeadlineExceeded):
			return err
		case !lost || resends == maxResends:
			return nil // shown, taken, or not known to be lost: Enter tells
		}
		if err := resend(); err != nil {
			return fmt.Errorf("coding agent: type again: %w", err)
		}
	}
}

// pressEnter presses Enter until the CLI takes the typed text: its hook
// fires, it shows busy, or the text leaves the input box.
func (c *Coder) pressEnter(ctx context.Context, text string, start uint64) error {
	pr := probes(text)
	presses := 4
	if c.p.EnterAgain {
		// It may drop Enters while it finishes initializing.
		presses = 15
	}
	for attempt := 0; attempt < presses; attempt++ {
		if err := c.s.Keys(ctx, "Enter"); err != nil {
			return fmt.Errorf("coding agent: enter: %w", err)
		}
		actx, cancel := context.WithTimeout(ctx, time.Second)
		err := c.watch(actx, func(screen []string, s snap) (bool, time.Time, error) {
			if s.TurnSeq > start || s.DoneSeq > c.cliSeq || s.dead || hasAny(screen, c.p.Busy) {
				return true, time.Time{}, nil
			}
			return !inInput(screen, pr), time.Time{}, nil
		})
		cancel()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case !errors.Is(err, context.DeadlineExceeded):
			return err
		}
	}
	screen, _ := c.s.Screen(ctx)
	return &AgentError{fmt.Sprintf("the coding agent (%s) did not take the input after %d presses of Enter; its screen:\n%s", c.p.Name, presses, strings.Join(tailLines(screen, 15), "\n"))}
}

// waitTurn waits for the end of the turn that began at seq start.
func (c *Coder) waitTurn(ctx context.Context, start uint64, progress func(string)) (TurnResult, error) {
	var res TurnResult
	tctx, cancel := context.WithTimeout(ctx, c.o.TurnTimeout)
	defer cancel()
	var reported []string
	var last string
	looked := false // what the first look finds is not news
	err := c.watch(tctx, func(screen []string, s snap) (bool, time.Time, error) {
		if progress != nil {
			// Whatever is new goes out; the gateway decides how often the
			// conversation hears of it.
			if snippet := c.fresh(screen, reported); looked && snippet != "" && snippet != last {
				progress(c.redact(snippet))
				last = snippet
			}
			reported, looked = screen, true
		}
		return c.turnEnded(&res, screen, s, start)
	})
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return res, ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		res.State = TurnWorking
	default:
		return res, err
	}
	// The screen and the answer and files (through the sandbox's agent)
	// are read at once: neither needs the other.
	var lines []string
	observed := make(chan error, 1)
	go func() {
		var err error
		lines, err = c.s.Observe(ctx)
		observed <- err
	}()
	c.endTurn(ctx, &res)
	if err := <-observed; err != nil {
		return res, err
	}
	res.Text = c.redact(terminal.Elide(c.clean(lines), 60, 20, 30))
	if res.State == TurnCrashed {
		c.running = false
		screen := res.Text
		resumed, err := c.startCLI(ctx, true)
		if err != nil {
			return res, err
		}
		res.Started, res.Resumed = true, resumed
		if !resumed {
			res.ResumeError = c.resumeErr
		}
		res.Text = screen
	}
	return res, nil
}

// turnEnded is waitTurn's check: it tells whether the turn that began at
// start ended (filling res.State), or when to look again.
func (c *Coder) turnEnded(res *TurnResult, screen []string, s snap, start uint64) (bool, time.Time, error) {
	if s.DoneSeq > c.cliSeq || s.dead {
		res.State, res.CrashStatus = TurnCrashed, s.status
		return true, time.Time{}, nil
	}
	busy := hasAny(screen, c.p.Busy)
	asking := hasAny(screen, c.p.Asking)
	quiet := c.o.Now().Sub(s.LastOutput)
	switch {
	case s.TurnSeq > start && !busy:
		// The CLI's own hook said the turn ended and its screen no longer
		// shows it working: its answer is what the (newest) hook was
		// given. While the screen still shows it working the turn is not
		// answered: Claude Code keeps its spinner only until its Stop hooks
		// have returned (the wait is the redraw), but a project's own
		// blocking Stop hook makes it go on working after conch's hook
		// ran, and answering then would answer with an interim text and
		// shift every later answer by one turn.
		res.State, res.Hook = TurnIdle, true
		if asking {
			res.State = TurnAsking
		}
		return true, time.Time{}, nil
	case s.TurnSeq > start:
		return false, time.Time{}, nil // the hook ran; wait for the screen
	case asking && !busy:
		if quiet >= 300*time.Millisecond {
			res.State = TurnAsking
			return true, time.Time{}, nil
		}
		return false, s.LastOutput.Add(300 * time.Millisecond), nil
	case !busy && hasAny(screen, c.p.Ready):
		// No hook (yet): an idle, quiet screen for long enough.
		if quiet >= c.p.settle() {
			res.State = TurnIdle
			return true, time.Time{}, nil
		}
		return false, s.LastOutput.Add(c.p.settle()), nil
	}
	return false, time.Time{}, nil
}

// fresh returns the lines of screen not in before, decoration left out.
func (c *Coder) fresh(screen, before []string) string {
	old := map[string]bool{}
	for _, l := range before {
		old[l] = true
	}
	var out []string
	for _, l := range c.clean(screen) {
		if !old[l] && !hasAny([]string{l}, c.p.Busy) {
			out = append(out, l)
		}
	}
	if len(out) > 8 {
		out = out[len(out)-8:]
	}
	return strings.Join(out, "\n")
}

var boxOnly = regexp.MustCompile(`^[\s╭╮╰╯─│┌┐└┘━┃▔▁]*$`)

// clean drops decoration: box borders, the empty input box, chrome lines.
func (c *Coder) clean(lines []string) []string {
	var out []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case t != "" && boxOnly.MatchString(t):
			continue
		case hasAny([]string{l}, c.p.Chrome):
			continue
		case strings.HasPrefix(t, "│ >") && strings.TrimSpace(strings.Trim(t, "│> ")) == "":
			continue
		case t == "❯" || t == ">" || t == "›":
			continue // an empty input line (Claude Code's ends in a no-break space)
		}
		out = append(out, l)
	}
	return terminal.TrimBlankTail(out)
}
