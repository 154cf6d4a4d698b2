package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"conch"
	"conch/terminal"
)

// TerminalRead is the tool `terminal_read`: it shows a terminal's screen
// without observing it. conch's MCP server offers it beside the other
// terminal tools, for a client that joins terminals the agent (or another
// client) already uses.
type TerminalRead struct{ P terminal.Provider }

var _ conch.Tool = (*TerminalRead)(nil)

// Spec implements conch.Tool.
func (t *TerminalRead) Spec() conch.ToolSpec {
	return conch.ToolSpec{
		Name: "terminal_read",
		Description: "Show what a terminal's screen shows now, with up to `history` lines of its scrollback above it. " +
			"It only looks: to learn what is new and whether a command finished, and before typing again, call " +
			"terminal_wait (observe before you act). Lists the open terminals when the one asked for is not open.",
		Parameters: schemaFor[terminalReadArgs](),
	}
}

type terminalReadArgs struct {
	TTY     *int `json:"tty" jsonschema:"terminal number" schema:"type=integer,minimum=0"`
	History int  `json:"history,omitempty" jsonschema:"lines of scrollback to show above the screen (default 0)" schema:"minimum=0,maximum=2000"`
}

// Run implements conch.Tool.
func (t *TerminalRead) Run(ctx context.Context, env conch.ToolEnv, raw json.RawMessage) (conch.ToolOutput, error) {
	var args terminalReadArgs
	if err := unmarshalArgs(raw, &args); err != nil || args.TTY == nil {
		return conch.ToolFail(`terminal_read takes {"tty": int, "history"?: int}`), nil
	}
	if args.History < 0 || args.History > terminal.MaxScreenHistory {
		return conch.ToolFail(fmt.Sprintf("history must be between 0 and %d", terminal.MaxScreenHistory)), nil
	}
	m, out, err := manager(ctx, t.P, env, "terminal_read")
	if out != nil || err != nil {
		return deref(out), err
	}
	lines, err := m.Screen(ctx, *args.TTY, args.History)
	switch {
	case conch.KindOf(err) == conch.KindNotFound:
		return conch.ToolFail(fmt.Sprintf("terminal %d is not open (open: %v)", *args.TTY, m.List())), nil
	case err != nil:
		return conch.ToolOutput{}, fmt.Errorf("terminal_read: %w", err)
	}
	head := fmt.Sprintf("[tty %d] screen now", *args.TTY)
	if len(lines) == 0 {
		return conch.ToolOK(head + ": (blank)"), nil
	}
	return conch.ToolOK(head + ":\n" + strings.Join(lines, "\n")), nil
}
