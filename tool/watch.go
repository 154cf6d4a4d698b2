package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"conch"
	"conch/schedule"
	"conch/terminal"
)

// Watch is the tool `watch`: wake this conversation once when a terminal's
// command exits, when a terminal prints a matching line, or when a
// workspace file changes.
type Watch struct {
	S *schedule.Scheduler
	P terminal.Provider
}

var _ conch.Tool = (*Watch)(nil)

// Spec implements conch.Tool.
func (t *Watch) Spec() conch.ToolSpec {
	return conch.ToolSpec{
		Name: "watch",
		Description: "Wake this conversation once when something happens in your computer, instead of waiting for it: " +
			"on \"exit\" when the command running in `terminal` ends (start it with terminal_type first), on \"match\" when " +
			"`terminal` prints a line matching the regular expression `pattern`, on \"file\" when `path` in the workspace " +
			"is created, changed or removed. You are then told what happened, with `message`; your answer goes to the " +
			"person. Use it for long builds and test runs, then end your turn. List and cancel with the schedule tool.",
		Parameters: schemaFor[watchArgs](),
	}
}

type watchArgs struct {
	On       string `json:"on" schema:"enum=exit|match|file"`
	Terminal *int   `json:"terminal,omitempty" schema:"type=integer,minimum=0"`
	Pattern  string `json:"pattern,omitempty" jsonschema:"for match: a Go regular expression, e.g. FAIL|error"`
	Path     string `json:"path,omitempty" jsonschema:"for file: relative to /workspace"`
	Message  string `json:"message" jsonschema:"what you will be told when it fires, e.g. report the test results"`
}

// Run implements conch.Tool.
func (t *Watch) Run(ctx context.Context, env conch.ToolEnv, raw json.RawMessage) (conch.ToolOutput, error) {
	var args watchArgs
	if err := unmarshalArgs(raw, &args); err != nil {
		return conch.ToolFail(`watch takes {"on": "exit"|"match"|"file", "terminal"?, "pattern"?, "path"?, "message"}: ` + err.Error()), nil
	}
	if t.S == nil {
		return conch.ToolFail("watches are turned off on this conch (schedule.enabled)"), nil
	}
	msg := strings.TrimSpace(args.Message)
	if msg == "" {
		return conch.ToolFail("give a `message`: what you should be told when the watch fires"), nil
	}
	spec := schedule.WatchSpec{On: schedule.WatchOn(args.On)}
	switch spec.On {
	case schedule.WatchExit, schedule.WatchMatch:
		if args.Terminal == nil {
			return conch.ToolFail(fmt.Sprintf("on %q needs `terminal`, the number terminal_open gave", args.On)), nil
		}
		spec.Terminal = *args.Terminal
		if spec.On == schedule.WatchMatch {
			if args.Pattern == "" {
				return conch.ToolFail("on \"match\" needs `pattern`, a regular expression"), nil
			}
			if _, err := regexp.Compile(args.Pattern); err != nil {
				return conch.ToolFail("pattern is not a valid regular expression: " + err.Error()), nil
			}
			spec.Pattern = args.Pattern
		}
		m, out, err := manager(ctx, t.P, env, "watch")
		if out != nil || err != nil {
			return deref(out), err
		}
		busy, err := m.Busy(spec.Terminal)
		if err != nil {
			return scheduleFailure("watch", err)
		}
		if spec.On == schedule.WatchExit && !busy {
			return conch.ToolFail(fmt.Sprintf("terminal %d is not running a command (its prompt is back): nothing to wait for. Look with terminal_wait.", spec.Terminal)), nil
		}
	case schedule.WatchFile:
		p, why := sandboxPath(args.Path)
		if why != "" {
			return conch.ToolFail(why), nil
		}
		spec.Path = p
		sb, out, err := sandbox(ctx, env, "watch")
		if out != nil || err != nil {
			return deref(out), err
		}
		if spec.Stamp, err = schedule.FileStamp(ctx, sb, p); err != nil {
			return sandboxFailure("watch", err)
		}
	default:
		return conch.ToolFail(fmt.Sprintf("unknown condition %q: use exit, match or file", args.On)), nil
	}
	e, err := t.S.Watch(ctx, env.Conversation, spec, msg)
	if err != nil {
		return scheduleFailure("watch", err)
	}
	return conch.ToolOK(fmt.Sprintf("Watching (%s): you will be woken %s. You can end your turn now.", e.ID, spec.Describe())), nil
}
