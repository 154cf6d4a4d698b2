package coder

import (
	"fmt"
	"strings"
	"time"
)

// TurnState is where a coding agent is when a call returns.
type TurnState string

// Turn states.
const (
	// TurnIdle: the agent finished its turn and waits for a task.
	TurnIdle TurnState = "idle"
	// TurnAsking: the agent asks a question or for permission; answer
	// with Respond.
	TurnAsking TurnState = "asking"
	// TurnWorking: the call's time ran out while the agent works on.
	TurnWorking TurnState = "working"
	// TurnCrashed: the CLI ended during the turn; it was started again.
	TurnCrashed TurnState = "crashed"
)

// TurnResult is what a Task or Respond call saw.
type TurnResult struct {
	State TurnState
	// Text is what the agent showed since the input was sent, decoration
	// left out, long runs elided.
	Text string
	// Answer is the agent's final message of the turn as its turn-end
	// hook gave it (not scraped from the screen); "" when the turn did not
	// end by the hook or the CLI's hook carries no message.
	Answer string
	// Changes are the workspace's files the task created, modified or
	// deleted since it was given (its own files, caches and version
	// control left out), by path; ChangesListed is false when they could
	// not be told (a workspace of more than MaxTrackedFiles files, or a
	// task given before conch restarted).
	Changes       []FileChange
	ChangesListed bool
	// Started is set when the CLI was (re)started by this call.
	Started bool
	// CrashStatus is the CLI's exit status for TurnCrashed.
	CrashStatus int
	// Restarted is set when the CLI had ended since the last call and was
	// started again before the task was sent.
	Restarted bool
	// ResumeError says why a CLI started again could not continue its
	// session, when it tried.
	ResumeError string
	// Resumed is set when the CLI, started again after a crash, continued
	// its previous session (its context kept) rather than starting afresh.
	Resumed bool
	// IPCFile is the file the task was written to, if it was long.
	IPCFile string
	// Hook is set when the CLI's own turn-end hook ended the turn (rather
	// than the screen settling).
	Hook    bool
	Elapsed time.Duration
}

// String renders the result for the model.
func (r TurnResult) String() string {
	var b strings.Builder
	switch r.State {
	case TurnIdle:
		b.WriteString("The coding agent finished its turn.")
	case TurnAsking:
		b.WriteString("The coding agent is asking something: answer with respond_to_agent.")
	case TurnWorking:
		fmt.Fprintf(&b, "The coding agent is still working after %s: call respond_to_agent with an empty text to keep waiting.", r.Elapsed.Round(time.Second))
	case TurnCrashed:
		if r.Resumed {
			fmt.Fprintf(&b, "The coding agent crashed (exit status %d) and was started again, continuing its previous session: it remembers the earlier tasks, but the work of the interrupted one may be incomplete. Check the files, then tell it with respond_to_agent what is still to do.", r.CrashStatus)
		} else {
			fmt.Fprintf(&b, "The coding agent crashed (exit status %d) and was started again without its previous session: it has lost the conversation and its context. Send the task again with code, with what it needs to know, if it is still needed.", r.CrashStatus)
		}
	}
	if r.Restarted && r.State != TurnCrashed {
		if r.Resumed {
			b.WriteString(" (It had exited since the last task and was started again, continuing its previous session.)")
		} else {
			b.WriteString(" (It had exited since the last task and was started again without its previous session: it does not remember the earlier tasks.)")
		}
	}
	if r.ResumeError != "" {
		fmt.Fprintf(&b, " (Continuing its session failed: %s)", r.ResumeError)
	}
	if r.IPCFile != "" {
		fmt.Fprintf(&b, " (The task was long, so it was written to %s.)", r.IPCFile)
	}
	if r.Answer != "" {
		b.WriteString("\nIts answer:\n")
		b.WriteString(r.Answer)
	}
	if r.ChangesListed {
		b.WriteString("\n")
		b.WriteString(changesLine(r.Changes))
	}
	if text := r.screenBesidesAnswer(); text != "" {
		if r.Answer != "" {
			b.WriteString("\nIts screen since the task:")
		}
		b.WriteString("\n")
		b.WriteString(text)
	}
	return b.String()
}

// maxListedChanges is how many changed files String names.
const maxListedChanges = 40

// changesLine tells the files a task changed.
func changesLine(changes []FileChange) string {
	if len(changes) == 0 {
		return "Files changed in the workspace: none."
	}
	var b strings.Builder
	b.WriteString("Files changed in the workspace:")
	for i, ch := range changes {
		if i == maxListedChanges {
			fmt.Fprintf(&b, " and %d more", len(changes)-i)
			break
		}
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " %s (%s)", ch.Path, ch.Kind)
	}
	b.WriteString(".")
	return b.String()
}

// screenBesidesAnswer is Text without the lines that only repeat the
// answer (the CLI drew its final message on the screen too).
func (r TurnResult) screenBesidesAnswer() string {
	if r.Answer == "" {
		return r.Text
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(r.Answer, "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	var out []string
	for _, l := range strings.Split(r.Text, "\n") {
		t := strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(l), "✦⏺•●─│ "))
		// A line of the answer, or a piece of one the screen wrapped
		// (long enough not to be, say, a file name a tool printed).
		if t != "" && (lines[t] || len([]rune(t)) >= 24 && strings.Contains(r.Answer, t)) {
			continue
		}
		out = append(out, l)
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}
