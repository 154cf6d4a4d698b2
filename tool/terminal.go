package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"conch"
	"conch/terminal"
)

// TerminalTools returns terminal_open, terminal_type, terminal_wait and
// terminal_close over p.
func TerminalTools(p terminal.Provider) []conch.Tool {
	return []conch.Tool{&TerminalOpen{p}, &TerminalType{p}, &TerminalWait{p}, &TerminalClose{p}}
}

// TerminalOpen is the tool `terminal_open`.
type TerminalOpen struct{ P terminal.Provider }

// TerminalType is the tool `terminal_type`.
type TerminalType struct{ P terminal.Provider }

// TerminalWait is the tool `terminal_wait`.
type TerminalWait struct{ P terminal.Provider }

// TerminalClose is the tool `terminal_close`.
type TerminalClose struct{ P terminal.Provider }

var (
	_ conch.Tool = (*TerminalOpen)(nil)
	_ conch.Tool = (*TerminalType)(nil)
	_ conch.Tool = (*TerminalWait)(nil)
	_ conch.Tool = (*TerminalClose)(nil)
)

// manager returns the conversation's terminal manager; a missing provider
// or sandbox runtime is a result the model reads.
func manager(ctx context.Context, p terminal.Provider, env conch.ToolEnv, op string) (*terminal.Manager, *conch.ToolOutput, error) {
	if p == nil || env.Sandboxes == nil {
		out := conch.ToolFail("there is no computer in this conversation: no sandbox runtime is configured")
		return nil, &out, nil
	}
	m, err := p.Manager(ctx, env.Conversation)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", op, err)
	}
	return m, nil, nil
}

// Spec implements conch.Tool.
func (t *TerminalOpen) Spec() conch.ToolSpec {
	return conch.ToolSpec{
		Name: "terminal_open",
		Description: "Open a persistent terminal (TTY) in your computer, in /workspace. Without a command it runs an interactive " +
			"bash whose commands report when they finish and with which exit status. With a command (one shell line, e.g. " +
			"`python3` or `npm run dev`) it runs that program. Terminals are numbered from 0, survive restarts, and are " +
			"used with terminal_type and terminal_wait. Returns the terminal number and its first screen.",
		Parameters: schemaFor[terminalOpenArgs](),
	}
}

type terminalOpenArgs struct {
	Command string `json:"command,omitempty" jsonschema:"program to run instead of a shell, e.g. python3"`
}

// Run implements conch.Tool.
func (t *TerminalOpen) Run(ctx context.Context, env conch.ToolEnv, raw json.RawMessage) (conch.ToolOutput, error) {
	var args terminalOpenArgs
	if err := unmarshalArgs(raw, &args); err != nil {
		return conch.ToolFail(`terminal_open takes {"command"?: string}: ` + err.Error()), nil
	}
	m, out, err := manager(ctx, t.P, env, "terminal_open")
	if out != nil || err != nil {
		return deref(out), err
	}
	res, err := m.Open(ctx, strings.TrimSpace(args.Command))
	switch {
	case errors.Is(err, terminal.ErrNoFreeTTY):
		return conch.ToolFail(fmt.Sprintf("all terminals are in use (%v): close one with terminal_close first", m.List())), nil
	case conch.KindOf(err) == conch.KindInvalid:
		return conch.ToolFail(conch.UserMessage(err)), nil
	case err != nil:
		return conch.ToolOutput{}, fmt.Errorf("terminal_open: %w", err)
	}
	head := fmt.Sprintf("Opened terminal %d (%d more can be opened).", res.TTY, res.Free)
	if res.First.State == terminal.StateExited {
		head = fmt.Sprintf("Terminal %d started, but its program already ended.", res.TTY)
	}
	return conch.ToolOK(head + "\n" + res.First.String()), nil
}

// Spec implements conch.Tool.
func (t *TerminalType) Spec() conch.ToolSpec {
	return conch.ToolSpec{
		Name: "terminal_type",
		Description: "Type into a terminal. `expect` names the program you believe is running there (e.g. bash, python3, vim); " +
			"if another one is, nothing is typed. Text is typed literally and followed by Enter (set enter=false to stop " +
			"that). Key names are sent as keys, without Enter: C-c, C-d, Tab, Enter, Escape, Up, Down, BSpace, or several " +
			"separated by spaces (\"Down Down Enter\"). Refused while any terminal has output you have not seen: call " +
			"terminal_wait after typing (observe before you act). Tip: call terminal_type and terminal_wait together.",
		Parameters: schemaFor[terminalTypeArgs](),
	}
}

type terminalTypeArgs struct {
	TTY    *int   `json:"tty" jsonschema:"terminal number" schema:"type=integer,minimum=0"`
	Expect string `json:"expect" jsonschema:"the program you expect to be running in the terminal, e.g. bash"`
	Text   string `json:"text" jsonschema:"text to type, or key names such as C-c"`
	Enter  *bool  `json:"enter,omitempty" jsonschema:"press Enter after the text (default true; never after key names)" schema:"type=boolean"`
}

// MaxTypeBytes is the longest text terminal_type sends.
const MaxTypeBytes = 16 << 10

// Run implements conch.Tool.
func (t *TerminalType) Run(ctx context.Context, env conch.ToolEnv, raw json.RawMessage) (conch.ToolOutput, error) {
	var args terminalTypeArgs
	if err := unmarshalArgs(raw, &args); err != nil || args.TTY == nil {
		msg := "tty is required"
		if err != nil {
			msg = err.Error()
		}
		return conch.ToolFail(`terminal_type takes {"tty": int, "expect": string, "text": string, "enter"?: bool}: ` + msg), nil
	}
	if strings.TrimSpace(args.Expect) == "" {
		return conch.ToolFail("expect is required: name the program you believe runs in the terminal (e.g. bash)"), nil
	}
	if len(args.Text) > MaxTypeBytes {
		return conch.ToolFail(fmt.Sprintf("text is %d bytes; at most %d. Write long input to a file with write_file and type a command that reads it.", len(args.Text), MaxTypeBytes)), nil
	}
	m, out, err := manager(ctx, t.P, env, "terminal_type")
	if out != nil || err != nil {
		return deref(out), err
	}
	enter := args.Enter == nil || *args.Enter
	err = m.Type(ctx, *args.TTY, args.Expect, args.Text, enter)
	var te *terminal.TypeError
	switch {
	case errors.As(err, &te):
		return conch.ToolFail(te.Msg), nil
	case err != nil:
		return conch.ToolOutput{}, fmt.Errorf("terminal_type: %w", err)
	}
	return conch.ToolOK(fmt.Sprintf("Typed into terminal %d. Call terminal_wait to see what happened.", *args.TTY)), nil
}

// Spec implements conch.Tool.
func (t *TerminalWait) Spec() conch.ToolSpec {
	return conch.ToolSpec{
		Name: "terminal_wait",
		Description: "Wait until every terminal is done, then show what is new in each since you last looked. A shell " +
			"terminal is done when its prompt is back (you get the exit status and directory); any other program when its " +
			"output has been quiet for a moment. Short output is shown whole, long output as its beginning and end. A " +
			"terminal whose program ended is reported once and closed, its scrollback saved under /workspace/.conch/terminals.",
		Parameters: schemaFor[terminalWaitArgs](),
	}
}

type terminalWaitArgs struct {
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty" jsonschema:"wait at most this long (default and maximum 60)" schema:"minimum=0,maximum=60"`
}

// Run implements conch.Tool.
func (t *TerminalWait) Run(ctx context.Context, env conch.ToolEnv, raw json.RawMessage) (conch.ToolOutput, error) {
	var args terminalWaitArgs
	if err := unmarshalArgs(raw, &args); err != nil {
		return conch.ToolFail(`terminal_wait takes {"timeout_seconds"?: number}: ` + err.Error()), nil
	}
	if math.IsNaN(args.TimeoutSeconds) || args.TimeoutSeconds < 0 {
		return conch.ToolFail("timeout_seconds must be a positive number"), nil
	}
	m, out, err := manager(ctx, t.P, env, "terminal_wait")
	if out != nil || err != nil {
		return deref(out), err
	}
	res, err := m.Wait(ctx, time.Duration(args.TimeoutSeconds*float64(time.Second)))
	if err != nil {
		return conch.ToolOutput{}, fmt.Errorf("terminal_wait: %w", err)
	}
	return conch.ToolOK(res.String()), nil
}

// Spec implements conch.Tool.
func (t *TerminalClose) Spec() conch.ToolSpec {
	return conch.ToolSpec{
		Name:        "terminal_close",
		Description: "Close a terminal: its program is ended and its scrollback saved under /workspace/.conch/terminals.",
		Parameters:  schemaFor[terminalCloseArgs](),
	}
}

type terminalCloseArgs struct {
	TTY *int `json:"tty" jsonschema:"terminal number" schema:"type=integer,minimum=0"`
}

// Run implements conch.Tool.
func (t *TerminalClose) Run(ctx context.Context, env conch.ToolEnv, raw json.RawMessage) (conch.ToolOutput, error) {
	var args terminalCloseArgs
	if err := unmarshalArgs(raw, &args); err != nil || args.TTY == nil {
		return conch.ToolFail(`terminal_close takes {"tty": int}`), nil
	}
	m, out, err := manager(ctx, t.P, env, "terminal_close")
	if out != nil || err != nil {
		return deref(out), err
	}
	archive, err := m.Close(ctx, *args.TTY)
	switch {
	case conch.KindOf(err) == conch.KindNotFound:
		return conch.ToolFail(fmt.Sprintf("terminal %d is not open (open: %v)", *args.TTY, m.List())), nil
	case err != nil:
		return conch.ToolOutput{}, fmt.Errorf("terminal_close: %w", err)
	}
	if archive == "" {
		return conch.ToolOK(fmt.Sprintf("Closed terminal %d.", *args.TTY)), nil
	}
	return conch.ToolOK(fmt.Sprintf("Closed terminal %d; its scrollback is in %s.", *args.TTY, archive)), nil
}

// unmarshalArgs decodes tool arguments, refusing unknown fields; empty
// arguments are an empty object.
func unmarshalArgs(raw json.RawMessage, v any) error {
	if len(strings.TrimSpace(string(raw))) == 0 {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
