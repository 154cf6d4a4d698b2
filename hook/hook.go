// Package hook runs a conversation's turn hooks (seed 003's contract) inside
// its sandbox: executables in /workspace/.conch/hooks/{pre-turn,pre-stop,
// post-turn}/, after the operator's defaults for the same stage, each stage
// in name order, dotfiles and "~" backups ignored.
//
// Every hook gets CONCH_TURN, CONCH_CONVERSATION, CONCH_LAST_MESSAGE and
// CONCH_TURN_LOG; post-turn hooks also CONCH_TURN_STATUS (normal or
// abnormal). pre-turn and post-turn hooks have 60 s, pre-stop hooks 30 s. A
// hook that fails or times out is logged and never ends the turn. Each line
// a pre-stop hook prints is an open issue the model is asked to address
// before it may finish (a failing pre-stop hook counts as no issues: fail
// open).
package hook

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"conch"
)

// Stage is when a hook runs.
type Stage string

// Stages.
const (
	PreTurn  Stage = "pre-turn"
	PreStop  Stage = "pre-stop"
	PostTurn Stage = "post-turn"
)

// Defaults of Options.
const (
	DefaultDir         = "/workspace/.conch/hooks"
	DefaultTimeout     = 60 * time.Second
	DefaultStopTimeout = 30 * time.Second
	// DefaultRunDir is where operator hooks and turn logs are written in
	// the sandbox (tmpfs).
	DefaultRunDir = "/tmp/conch/hooks"
	// maxEnvMessage caps CONCH_LAST_MESSAGE.
	maxEnvMessage = 32 << 10
	// maxIssues caps the issues one pre-stop round returns.
	maxIssues = 20
)

// Script is an operator hook: its name and content, written into the
// sandbox before it runs.
type Script struct {
	Name string
	Body []byte
}

// Options configures a Runner.
type Options struct {
	Sandboxes conch.SandboxProvider
	// Exists reports whether the conversation has a sandbox already; when
	// set, conversations without one run no hooks (no computer is created
	// just to look for hooks).
	Exists func(ctx context.Context, key conch.ConversationKey) bool
	// Operator holds the operator's default hooks per stage; they run
	// before the conversation's own.
	Operator map[Stage][]Script
	// Dir is the conversation's hook directory; "" means DefaultDir.
	Dir string
	// RunDir receives operator hooks and turn logs; "" means DefaultRunDir.
	RunDir string
	// Timeout bounds a pre-turn or post-turn hook, StopTimeout a pre-stop hook.
	Timeout, StopTimeout time.Duration
	Logger               *slog.Logger
}

// Runner runs hooks. It is safe for concurrent use.
type Runner struct{ o Options }

// New returns a Runner.
func New(o Options) *Runner {
	if o.Dir == "" {
		o.Dir = DefaultDir
	}
	if o.RunDir == "" {
		o.RunDir = DefaultRunDir
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = DefaultStopTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Runner{o: o}
}

// Turn is what hooks are told about a turn.
type Turn struct {
	Key  conch.ConversationKey
	Turn conch.TurnID
	// LastMessage is the person's message before the turn, the model's
	// answer at pre-stop and after the turn.
	LastMessage string
	// Normal is false for a turn that ended abnormally (post-turn only).
	Normal bool
	// Log is a short account of the turn (the message and the answer);
	// it is written to the file CONCH_TURN_LOG names.
	Log string
}

// Result is one hook's run.
type Result struct {
	Name     string
	ExitCode int
	Output   string
	Stopped  conch.StoppedReason
	Err      error
}

// OK reports whether the hook ran and exited 0.
func (r Result) OK() bool { return r.Err == nil && r.ExitCode == 0 && r.Stopped == conch.StoppedNone }

// Run runs the stage's hooks in order and returns their results. A
// conversation without a sandbox, or without hooks, runs nothing.
func (r *Runner) Run(ctx context.Context, stage Stage, t Turn) []Result {
	if r.o.Sandboxes == nil || (r.o.Exists != nil && !r.o.Exists(ctx, t.Key)) {
		return nil
	}
	log := r.o.Logger.With("conversation", t.Key, "turn", t.Turn, "stage", stage)
	sb, err := r.o.Sandboxes.Sandbox(ctx, t.Key)
	if err != nil {
		log.Warn("hooks not run: no sandbox", "err", err)
		return nil
	}
	paths := r.operator(ctx, sb, stage, log)
	paths = append(paths, r.find(ctx, sb, path.Join(r.o.Dir, string(stage)), log)...)
	if len(paths) == 0 {
		return nil
	}
	env := r.env(ctx, sb, stage, t, log)
	timeout := r.o.Timeout
	if stage == PreStop {
		timeout = r.o.StopTimeout
	}
	var out []Result
	for _, p := range paths {
		res, err := sb.Exec(ctx, conch.ExecRequest{Argv: []string{p}, Env: env, Timeout: timeout, OutputLimit: 64 << 10})
		hr := Result{Name: p, ExitCode: res.ExitCode, Output: string(res.Output), Stopped: res.Stopped, Err: err}
		switch {
		case err != nil:
			log.Warn("hook failed to run", "hook", p, "err", err)
		case res.Stopped != conch.StoppedNone:
			log.Warn("hook stopped", "hook", p, "reason", res.Stopped, "after", res.Duration)
		case res.ExitCode != 0:
			log.Warn("hook failed", "hook", p, "exit", res.ExitCode, "output", clip(string(res.Output), 500))
		default:
			log.Debug("hook ran", "hook", p, "took", res.Duration)
		}
		out = append(out, hr)
		if ctx.Err() != nil {
			break
		}
	}
	return out
}

// Issues runs the pre-stop hooks and returns the open issues they printed,
// one per non-empty stdout line, from hooks that exited 0 in time. A hook
// that fails or times out counts as no issues (fail open).
func (r *Runner) Issues(ctx context.Context, t Turn) []string {
	return r.stage(ctx, PreStop, t).Issues
}

// stage runs a stage's hooks and sums them up as an event; for pre-stop
// with the open issues.
func (r *Runner) stage(ctx context.Context, stage Stage, t Turn) conch.HookRan {
	results := r.Run(ctx, stage, t)
	ran := conch.HookRan{Stage: string(stage), Hooks: len(results)}
	for _, res := range results {
		if !res.OK() {
			ran.Failed = append(ran.Failed, res.Name)
			continue
		}
		if stage != PreStop {
			continue
		}
		for _, line := range strings.Split(res.Output, "\n") {
			if line = strings.TrimSpace(line); line != "" && len(ran.Issues) < maxIssues {
				ran.Issues = append(ran.Issues, line)
			}
		}
	}
	return ran
}

// find lists the executables of dir, sorted by name, skipping dotfiles,
// "~" backups and directories. A missing dir has none.
func (r *Runner) find(ctx context.Context, sb conch.Sandbox, dir string, log *slog.Logger) []string {
	fis, err := sb.ListFiles(ctx, dir)
	if err != nil {
		if conch.KindOf(err) != conch.KindNotFound {
			log.Warn("hooks: list", "dir", dir, "err", err)
		}
		return nil
	}
	var names []string
	for _, fi := range fis {
		if fi.IsDir || strings.HasPrefix(fi.Name, ".") || strings.HasSuffix(fi.Name, "~") || fi.Mode.Perm()&0o111 == 0 {
			continue
		}
		names = append(names, fi.Name)
	}
	slices.Sort(names)
	for i, n := range names {
		names[i] = path.Join(dir, n)
	}
	return names
}

// operator writes the operator's hooks of stage into the sandbox and
// returns their paths in name order.
func (r *Runner) operator(ctx context.Context, sb conch.Sandbox, stage Stage, log *slog.Logger) []string {
	scripts := slices.Clone(r.o.Operator[stage])
	sort.Slice(scripts, func(i, j int) bool { return scripts[i].Name < scripts[j].Name })
	var paths []string
	for _, s := range scripts {
		if s.Name == "" || strings.HasPrefix(s.Name, ".") || strings.HasSuffix(s.Name, "~") || strings.Contains(s.Name, "/") {
			continue
		}
		p := path.Join(r.o.RunDir, string(stage), s.Name)
		if err := sb.WriteFile(ctx, p, s.Body, 0o755); err != nil {
			log.Warn("operator hook not written", "hook", s.Name, "err", err)
			continue
		}
		paths = append(paths, p)
	}
	return paths
}

// env is the hooks' environment; it writes the turn log into the sandbox.
func (r *Runner) env(ctx context.Context, sb conch.Sandbox, stage Stage, t Turn, log *slog.Logger) []string {
	env := []string{
		"CONCH_HOOK=" + string(stage),
		"CONCH_TURN=" + strconv.FormatInt(int64(t.Turn), 10),
		"CONCH_CONVERSATION=" + t.Key.String(),
		"CONCH_LAST_MESSAGE=" + clipBytes(t.LastMessage, maxEnvMessage),
	}
	logPath := path.Join(r.o.RunDir, fmt.Sprintf("turn-%d.log", t.Turn))
	if err := sb.WriteFile(ctx, logPath, []byte(t.Log), 0o644); err != nil {
		log.Warn("hooks: turn log not written", "err", err)
	} else {
		env = append(env, "CONCH_TURN_LOG="+logPath)
	}
	if stage == PostTurn {
		status := "normal"
		if !t.Normal {
			status = "abnormal"
		}
		env = append(env, "CONCH_TURN_STATUS="+status)
	}
	return env
}

// clipBytes cuts s to at most n bytes, dropping a rune cut in half and NUL
// bytes (an environment value cannot hold one).
func clipBytes(s string, n int) string {
	s = strings.ReplaceAll(s, "\x00", "")
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// LoadOperator reads the operator's default hooks from a host directory
// laid out like the sandbox's (pre-turn/, pre-stop/, post-turn/): the
// executable files of each, dotfiles and "~" backups ignored. A missing
// stage directory has none.
func LoadOperator(dir string) (map[Stage][]Script, error) {
	out := map[Stage][]Script{}
	for _, st := range []Stage{PreTurn, PreStop, PostTurn} {
		ents, err := os.ReadDir(filepath.Join(dir, string(st)))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("operator hooks: %w", err)
		}
		for _, e := range ents {
			name := e.Name()
			if e.IsDir() || strings.HasPrefix(name, ".") || strings.HasSuffix(name, "~") {
				continue
			}
			fi, err := e.Info()
			if err != nil || fi.Mode().Perm()&0o111 == 0 {
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, string(st), name))
			if err != nil {
				return nil, fmt.Errorf("operator hooks: %w", err)
			}
			out[st] = append(out[st], Script{Name: name, Body: b})
		}
	}
	return out, nil
}
