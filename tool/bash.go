package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"conch"
)

// Defaults of the bash tool.
const (
	DefaultBashTimeout     = 2 * time.Minute
	DefaultBashOutputLimit = 20000
	// MaxCommandBytes is the longest command line accepted.
	MaxCommandBytes = 64 << 10
)

// BashOptions configures the bash tool.
type BashOptions struct {
	// Allow lists the programs argv[0] may name: bare names ("git") match a
	// bare argv[0], paths ("/usr/bin/python3") match exactly. Empty allows
	// every program.
	Allow []string
	// Timeout is the default and the longest run a call may ask for; 0
	// means DefaultBashTimeout.
	Timeout time.Duration
	// OutputLimit is how many bytes of output the model sees: all of it when
	// shorter, else the first and the last half; 0 means
	// DefaultBashOutputLimit.
	OutputLimit int
	// Auditor, if set, records every execution (kind "exec") and every
	// program refused by Allow (kind "exec_refused"). If it fails, the turn
	// ends: nothing runs unaudited.
	Auditor conch.AuditStore
	// Approve, if set, names commands a person must allow first
	// (tools.approve); a person is asked through ToolEnv.Approvals.
	Approve *ApprovePolicy
	// Now is the clock of audit events; nil means time.Now.
	Now func() time.Time
}

// Bash is the tool `bash`: it runs one program in the conversation's
// sandbox. The command line is split into words with shell quoting rules
// and run WITHOUT a shell.
type Bash struct {
	opts  BashOptions
	allow map[string]bool
}

var _ conch.Tool = (*Bash)(nil)

// NewBash returns the bash tool.
func NewBash(opts BashOptions) *Bash {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultBashTimeout
	}
	if opts.OutputLimit <= 0 {
		opts.OutputLimit = DefaultBashOutputLimit
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	b := &Bash{opts: opts}
	if len(opts.Allow) > 0 {
		b.allow = make(map[string]bool, len(opts.Allow))
		for _, p := range opts.Allow {
			b.allow[p] = true
		}
	}
	return b
}

// Spec implements conch.Tool.
func (b *Bash) Spec() conch.ToolSpec {
	desc := "Run one program in your computer (a Linux container; the working directory is /workspace, which persists). " +
		"The command is split into words like a shell does (single and double quotes and backslashes work), but it runs " +
		"WITHOUT a shell: pipes, redirects, &&, ||, ;, &, backticks, $(...), $VARIABLES, unquoted globs (*.go) and ~ are " +
		"refused. Run steps as separate calls, or write a script with write_file and run it (e.g. `bash build.sh`). " +
		"NAME=value before the program sets an environment variable for it. stdout and stderr come back together with " +
		fmt.Sprintf("the exit code; long output shows its beginning and end (%d bytes in all). ", b.opts.OutputLimit) +
		fmt.Sprintf("A run is killed after %s, or sooner with timeout_seconds. ", b.opts.Timeout) +
		"Everything a run starts ends with it, background processes included: start long-lived programs " +
		"(servers, watchers) in a terminal instead."
	if len(b.opts.Allow) > 0 {
		desc += " Allowed programs: " + strings.Join(b.opts.Allow, ", ") + "."
	}
	secs := int(b.opts.Timeout.Seconds())
	params := schemaFor[bashArgs](maximum("timeout_seconds", float64(secs),
		fmt.Sprintf("kill the program after this many seconds (default and maximum %d)", secs)))
	return conch.ToolSpec{Name: "bash", Description: desc, Parameters: params}
}

type bashArgs struct {
	Command        string  `json:"command" jsonschema:"the program and its arguments, e.g. git status --short"`
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty" schema:"type=integer,minimum=1"`
	Workdir        string  `json:"workdir,omitempty" jsonschema:"working directory, relative to /workspace or absolute under /workspace or /tmp (default /workspace)"`
}

// Run implements conch.Tool.
func (b *Bash) Run(ctx context.Context, env conch.ToolEnv, raw json.RawMessage) (conch.ToolOutput, error) {
	var args bashArgs
	if err := json.Unmarshal(raw, &args); err != nil {
		return conch.ToolFail(`bash needs {"command": string}: ` + err.Error()), nil
	}
	if n := len(args.Command); n > MaxCommandBytes {
		return conch.ToolFail(fmt.Sprintf("the command is %d bytes long; at most %d. Put long content in a file with write_file and pass the file name.", n, MaxCommandBytes)), nil
	}
	cmd, err := SplitCommand(args.Command)
	if err != nil {
		return conch.ToolFail(b.refusal(err)), nil
	}
	if hint, ok := shellBuiltins[cmd.Argv[0]]; ok {
		return conch.ToolFail(fmt.Sprintf("%s is a shell builtin, and commands run without a shell. %s", cmd.Argv[0], hint)), nil
	}
	if msg := b.checkAllowed(cmd); msg != "" {
		if b.opts.Auditor != nil {
			if err := conch.RecordAudit(ctx, b.opts.Auditor, b.opts.Now(), conch.AuditExecRefused, env.Conversation, map[string]any{
				"tool": "bash", "argv": cmd.Argv, "reason": msg,
			}); err != nil {
				return conch.ToolOutput{}, fmt.Errorf("bash: %w", err)
			}
		}
		return conch.ToolFail(msg), nil
	}
	if out, err := b.approve(ctx, env, args.Command, cmd); out != nil || err != nil {
		return deref(out), err
	}
	dir := workspaceDir
	if args.Workdir != "" {
		var msg string
		if dir, msg = sandboxPath(args.Workdir); msg != "" {
			return conch.ToolFail("workdir: " + msg), nil
		}
	}
	timeout := b.opts.Timeout
	switch {
	case math.IsNaN(args.TimeoutSeconds) || args.TimeoutSeconds < 0:
		return conch.ToolFail("timeout_seconds must be a positive number"), nil
	case args.TimeoutSeconds > 0:
		timeout = min(timeout, time.Duration(args.TimeoutSeconds*float64(time.Second)))
		timeout = max(timeout, time.Second)
	}
	sb, out, err := sandbox(ctx, env, "bash")
	if out != nil || err != nil {
		return deref(out), err
	}

	tail := &tailBuffer{max: b.opts.OutputLimit / 2}
	res, err := sb.Exec(ctx, conch.ExecRequest{
		Argv:        cmd.Argv,
		Env:         cmd.Env,
		Dir:         dir,
		Timeout:     timeout,
		OutputLimit: b.opts.OutputLimit,
		OnOutput:    tail.write,
	})
	if b.opts.Auditor != nil {
		if aerr := b.audit(ctx, env, sb.ID(), cmd, dir, res, tail.total, err); aerr != nil {
			return conch.ToolOutput{}, fmt.Errorf("bash: %w", aerr)
		}
	}
	if err != nil {
		return sandboxFailure("bash", err)
	}
	if res.Stopped == conch.StoppedCanceled && ctx.Err() != nil {
		return conch.ToolOutput{}, fmt.Errorf("bash: %w", ctx.Err())
	}
	exit := res.ExitCode
	return conch.ToolOutput{
		Content:  formatExec(res, tail, b.opts.OutputLimit, timeout),
		IsError:  res.ExitCode != 0 || res.Stopped != conch.StoppedNone,
		ExitCode: &exit,
	}, nil
}

func (b *Bash) checkAllowed(cmd Command) string {
	if b.allow == nil {
		return ""
	}
	prog := cmd.Argv[0]
	if !b.allow[prog] {
		return fmt.Sprintf("refused: %s is not an allowed program here. Allowed programs: %s.", prog, strings.Join(b.opts.Allow, ", "))
	}
	for _, kv := range cmd.Env {
		name, _, _ := strings.Cut(kv, "=")
		if name == "PATH" || name == "BASH_ENV" || name == "ENV" || strings.HasPrefix(name, "LD_") {
			return fmt.Sprintf("refused: with a list of allowed programs, a command may not set %s", name)
		}
	}
	return ""
}

// approve asks a person when the policy names a command the line runs; it
// returns the refusal the model reads when the answer is no.
func (b *Bash) approve(ctx context.Context, env conch.ToolEnv, line string, cmd Command) (*conch.ToolOutput, error) {
	m, ok := b.opts.Approve.Match(cmd.Argv)
	if !ok {
		return nil, nil
	}
	if env.Approvals == nil {
		out := conch.ToolFail(fmt.Sprintf("refused: the operator's policy needs a person's approval for commands like `%s`, and nobody can be asked here.", m.Pattern))
		return &out, nil
	}
	detail := fmt.Sprintf("It matches the approval rule `%s`", m.Pattern)
	if m.Command != strings.Join(cmd.Argv, " ") {
		detail += fmt.Sprintf(" (through `%s`)", clipLine(m.Command, 200))
	}
	d, err := env.Approvals.Approve(ctx, env.CallID, conch.ApprovalRequest{
		Kind: "command", Title: clipLine(line, 500), Detail: detail + ".", Scope: "command:" + m.Pattern, Resumable: true,
	})
	if err != nil {
		return nil, fmt.Errorf("bash: approval: %w", err)
	}
	if d.Choice.Allows() {
		return nil, nil
	}
	var out conch.ToolOutput
	switch d.Reason {
	case conch.ApprovalReasonTimeout:
		out = conch.ToolFail(fmt.Sprintf("refused: this command needs a person's approval (rule `%s`) and nobody answered in time, so it did not run. Do not retry it unasked; tell the person what you wanted to run and why.", m.Pattern))
	case conch.ApprovalReasonTurnEnded:
		out = conch.ToolFail(fmt.Sprintf("refused: the turn ended while waiting for a person's approval (rule `%s`), so the command did not run.", m.Pattern))
	default:
		out = conch.ToolFail(fmt.Sprintf("refused: %s denied this command (rule `%s`), so it did not run. Do not try to run it another way; ask the person what they want instead.", orSomeone(d.By), m.Pattern))
	}
	return &out, nil
}

func orSomeone(u conch.UserID) string {
	if u == "" {
		return "the person"
	}
	return string(u)
}

func clipLine(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// shellBuiltins are commands that exist only inside a shell, with what to
// do instead.
var shellBuiltins = map[string]string{
	"cd":      "Pass the directory as workdir instead; each call starts in /workspace.",
	"export":  "Set a variable for one program with a NAME=value prefix (FOO=1 make); nothing carries over between calls.",
	"set":     "Set a variable for one program with a NAME=value prefix (FOO=1 make); nothing carries over between calls.",
	"unset":   "Each call starts with a fresh environment; there is nothing to unset.",
	"source":  "Put the steps in a script and run it with bash.",
	".":       "Put the steps in a script and run it with bash.",
	"alias":   "Write the full command each time.",
	"ulimit":  "Put the steps in a script and run it with bash.",
	"exit":    "There is no shell session to exit.",
	"history": "There is no shell session, so no history.",
}

// refusal explains a command line that cannot run without a shell.
func (b *Bash) refusal(err error) string {
	se, ok := err.(*ShellError)
	if !ok {
		return "cannot run the command: " + err.Error()
	}
	script := " Run the steps as separate bash calls, or write them into a script with write_file and run it with `bash script.sh`."
	if b.allow != nil && !b.allow["bash"] {
		script = " Run the steps as separate bash calls (bash itself is not among the allowed programs here, so scripts cannot be run with it)."
	}
	switch se.Kind {
	case ShellOperator, ShellSubstitution:
		msg := "refused: " + se.Msg + ". Commands run directly, without a shell, so pipes, redirects, &&, ||, ;, &, backticks and $(...) are not available."
		switch {
		case se.Token == "2>&1":
			msg += " stdout and stderr already come back together: drop 2>&1."
		case strings.Contains(se.Token, ">"):
			msg += " To save output in a file, use write_file or a script."
		}
		return msg + script
	case ShellExpansion:
		return "refused: " + se.Msg + ". There is no shell to expand variables: write the value itself, or use single quotes if the program should see a literal $."
	case ShellGlob:
		return "refused: " + se.Msg + ". There is no shell to expand patterns: quote the pattern if the program should receive it as is (e.g. find . -name '*.go'), or look with list_files."
	case ShellTilde:
		return "refused: " + se.Msg + ". Use /workspace or an absolute path instead."
	case ShellQuote:
		return "cannot parse the command: " + se.Msg + ". Close the quote, or escape a literal quote with a backslash."
	}
	return "cannot run the command: " + se.Msg + "."
}

func (b *Bash) audit(ctx context.Context, env conch.ToolEnv, containerID string, cmd Command, dir string, res conch.ExecResult, outBytes int64, execErr error) error {
	envNames := make([]string, 0, len(cmd.Env))
	for _, kv := range cmd.Env {
		name, _, _ := strings.Cut(kv, "=")
		envNames = append(envNames, name)
	}
	detail := map[string]any{
		"tool":           "bash",
		"container_id":   containerID,
		"argv":           cmd.Argv,
		"env":            envNames,
		"dir":            dir,
		"duration_ms":    res.Duration.Milliseconds(),
		"exit_code":      res.ExitCode,
		"truncated":      res.Truncated,
		"stopped_reason": string(res.Stopped),
		"output_bytes":   outBytes,
	}
	if execErr != nil {
		detail["exit_code"] = -1
		detail["error"] = execErr.Error()
	}
	return conch.RecordAudit(ctx, b.opts.Auditor, b.opts.Now(), conch.AuditExec, env.Conversation, detail)
}

// formatExec renders a result for the model: a status line, then the
// output, or its head and tail when it was longer than limit.
func formatExec(res conch.ExecResult, tail *tailBuffer, limit int, timeout time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "exit code %d · %s", res.ExitCode, fmtDuration(res.Duration))
	switch res.Stopped {
	case conch.StoppedTimeout:
		fmt.Fprintf(&b, "\nkilled: it ran longer than the %s timeout (the program and everything it started were stopped)", timeout)
	case conch.StoppedOutput:
		fmt.Fprintf(&b, "\nkilled: it printed more output than allowed (%d bytes)", tail.total)
	case conch.StoppedOOM:
		b.WriteString("\nkilled: the sandbox ran out of memory")
	case conch.StoppedCanceled:
		b.WriteString("\nkilled: the run was canceled")
	}
	out := res.Output
	switch {
	case len(out) == 0 && tail.total == 0:
		b.WriteString("\n(no output)")
		return b.String()
	case tail.total <= int64(limit) && !res.Truncated:
		b.WriteString("\n\n")
		b.WriteString(strings.ToValidUTF8(string(out), "\uFFFD"))
		return b.String()
	case tail.total < int64(len(out)):
		// The sandbox did not stream output: only the head is known.
		fmt.Fprintf(&b, "\noutput truncated: showing the first %d bytes\n\n", len(out))
		b.WriteString(strings.ToValidUTF8(cutValid(string(out), len(out)), "\uFFFD"))
		return b.String()
	}
	headN := min(len(out), limit-limit/2)
	head := cutValid(string(out), headN)
	t := tail.bytes()
	tailText := string(t)
	// Skip a partial UTF-8 sequence at the start of the tail.
	for i := 0; i < 3 && len(tailText) > 0 && !startsValid(tailText); i++ {
		tailText = tailText[1:]
	}
	omitted := tail.total - int64(len(head)) - int64(len(tailText))
	fmt.Fprintf(&b, "\noutput truncated: %d bytes in all; showing the first %d and the last %d\n\n", tail.total, len(head), len(tailText))
	b.WriteString(strings.ToValidUTF8(head, "\uFFFD"))
	fmt.Fprintf(&b, "\n[… %d bytes omitted …]\n", omitted)
	b.WriteString(strings.ToValidUTF8(tailText, "\uFFFD"))
	return b.String()
}

func startsValid(s string) bool {
	return len(s) > 0 && (s[0] < 0x80 || s[0] >= 0xC0)
}

func fmtDuration(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// tailBuffer keeps the last max bytes of a stream and counts all of it.
type tailBuffer struct {
	max   int
	buf   []byte
	total int64
}

func (t *tailBuffer) write(p []byte) {
	t.total += int64(len(p))
	if t.max <= 0 {
		return
	}
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return
	}
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max {
		t.buf = slices.Clone(t.buf[len(t.buf)-t.max:])
	}
}

func (t *tailBuffer) bytes() []byte {
	if len(t.buf) > t.max {
		return t.buf[len(t.buf)-t.max:]
	}
	return t.buf
}
