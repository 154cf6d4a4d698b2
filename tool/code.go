package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"conch"
	"conch/terminal"
	"conch/terminal/coder"
)

// CodeOptions configures the coding-agent tools.
type CodeOptions struct {
	// Profile is the CLI to run (coder.Gemini(), coder.Claude(),
	// coder.Codex()).
	Profile coder.Profile
	// Coder tunes the session (timeouts, environment, IPC threshold).
	Coder coder.Options
}

// CodeTools returns `code` and `respond_to_agent` over p.
func CodeTools(p terminal.Provider, o CodeOptions) []conch.Tool {
	return []conch.Tool{&Code{P: p, O: o}, &RespondToAgent{P: p, O: o}}
}

// Code is the tool `code`: a task for the conversation's coding agent.
type Code struct {
	P terminal.Provider
	O CodeOptions
}

// RespondToAgent is the tool `respond_to_agent`: an answer to the coding
// agent's question.
type RespondToAgent struct {
	P terminal.Provider
	O CodeOptions
}

var (
	_ conch.Tool = (*Code)(nil)
	_ conch.Tool = (*RespondToAgent)(nil)
)

// Spec implements conch.Tool.
func (t *Code) Spec() conch.ToolSpec {
	return conch.ToolSpec{
		Name: "code",
		Description: fmt.Sprintf("Give a programming task to the coding agent (%s) that works in your computer's /workspace. "+
			"It keeps its session between tasks, so it remembers earlier ones. Describe the task fully; long tasks are "+
			"passed through a file. Returns when the agent finished its turn or asks something (then answer with "+
			"respond_to_agent), with its answer, the files of the workspace it changed and what its screen showed.", t.O.Profile.Name),
		Parameters: schemaFor[codeArgs](),
	}
}

type codeArgs struct {
	Task string `json:"task" jsonschema:"what the coding agent should do"`
}

// Run implements conch.Tool.
func (t *Code) Run(ctx context.Context, env conch.ToolEnv, raw json.RawMessage) (conch.ToolOutput, error) {
	var args codeArgs
	if err := unmarshalArgs(raw, &args); err != nil || strings.TrimSpace(args.Task) == "" {
		return conch.ToolFail(`code takes {"task": string}, a non-empty task`), nil
	}
	c, out, err := codingAgent(ctx, t.P, t.O, env, "code")
	if out != nil || err != nil {
		return deref(out), err
	}
	res, err := c.Task(ctx, args.Task, progress(env))
	return turnOutput("code", res, err)
}

// Spec implements conch.Tool.
func (t *RespondToAgent) Spec() conch.ToolSpec {
	return conch.ToolSpec{
		Name: "respond_to_agent",
		Description: "Answer the coding agent when it asks a question or for permission (for a menu, the number of the " +
			"choice, e.g. 1). With an empty text, keep waiting for an agent that is still working. Returns like code.",
		Parameters: schemaFor[respondArgs](),
	}
}

type respondArgs struct {
	Text *string `json:"text" jsonschema:"your answer; empty to keep waiting" schema:"type=string"`
}

// Run implements conch.Tool.
func (t *RespondToAgent) Run(ctx context.Context, env conch.ToolEnv, raw json.RawMessage) (conch.ToolOutput, error) {
	var args respondArgs
	if err := unmarshalArgs(raw, &args); err != nil || args.Text == nil {
		return conch.ToolFail(`respond_to_agent takes {"text": string}`), nil
	}
	c, out, err := codingAgent(ctx, t.P, t.O, env, "respond_to_agent")
	if out != nil || err != nil {
		return deref(out), err
	}
	res, err := c.Respond(ctx, *args.Text, progress(env))
	if errors.Is(err, coder.ErrNoAgent) {
		return conch.ToolFail("no coding agent is running: give it a task with code first"), nil
	}
	return turnOutput("respond_to_agent", res, err)
}

func codingAgent(ctx context.Context, p terminal.Provider, o CodeOptions, env conch.ToolEnv, op string) (*coder.Coder, *conch.ToolOutput, error) {
	m, out, err := manager(ctx, p, env, op)
	if out != nil || err != nil {
		return nil, out, err
	}
	return coder.For(m, env.Conversation, o.Profile, o.Coder), nil, nil
}

func turnOutput(op string, res coder.TurnResult, err error) (conch.ToolOutput, error) {
	var ae *coder.AgentError
	switch {
	case errors.As(err, &ae):
		return conch.ToolFail(ae.Msg), nil
	case conch.KindOf(err) == conch.KindInvalid:
		return conch.ToolFail(conch.UserMessage(err)), nil
	case err != nil:
		return conch.ToolOutput{}, fmt.Errorf("%s: %w", op, err)
	}
	return conch.ToolOutput{Content: res.String(), IsError: res.State == coder.TurnCrashed}, nil
}

// progress returns a reporter that passes on every new report and drops
// one identical to the last; how often the conversation hears of them is
// the gateway's choice.
func progress(env conch.ToolEnv) func(string) {
	var mu sync.Mutex
	var last string
	return func(s string) {
		mu.Lock()
		if s == last {
			mu.Unlock()
			return
		}
		last = s
		mu.Unlock()
		env.Report("coding agent:\n" + s)
	}
}
