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
	// Person sends the CLI's permission prompts to the conversation's
	// people (coder.approvals = person; Coder.Ask must be set too): the
	// model never answers them.
	Person bool
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
	res, notes, err := t.O.askPerson(ctx, env, c, res, err)
	return withNotes(turnOutput("code", res, err))(notes)
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
	var res coder.TurnResult
	var notes []string
	if t.O.Person && *args.Text != "" {
		// The model never answers a permission prompt: when the CLI is
		// asking (or asks once its work goes on), its people decide and
		// the model's text is not typed into the menu.
		res, err = c.Respond(ctx, "", progress(env))
		if err == nil && res.State == coder.TurnAsking {
			notes = append(notes, "The coding agent was asking permission, which its people answer, so your text was not sent; send it again with respond_to_agent if it is still needed.")
			var more []string
			res, more, err = t.O.askPerson(ctx, env, c, res, err)
			return withNotes(turnOutput("respond_to_agent", res, err))(append(more, notes...))
		}
		if err != nil && !errors.Is(err, coder.ErrNoAgent) {
			return turnOutput("respond_to_agent", res, err)
		}
	}
	if err == nil || errors.Is(err, coder.ErrNoAgent) {
		res, err = c.Respond(ctx, *args.Text, progress(env))
	}
	if errors.Is(err, coder.ErrNoAgent) {
		return conch.ToolFail("no coding agent is running: give it a task with code first"), nil
	}
	res, notes, err = t.O.askPerson(ctx, env, c, res, err)
	return withNotes(turnOutput("respond_to_agent", res, err))(notes)
}

// maxPermissionPrompts bounds how many permission prompts of one call go
// to people before the model hears of it.
const maxPermissionPrompts = 20

// askPerson hands the CLI's permission prompts to the conversation's
// people (coder.approvals = person) and answers the menu with their
// choice, until the CLI stops asking. notes tell the model what was
// decided.
func (o CodeOptions) askPerson(ctx context.Context, env conch.ToolEnv, c *coder.Coder, res coder.TurnResult, err error) (coder.TurnResult, []string, error) {
	if !o.Person {
		return res, nil, err
	}
	var notes []string
	for n := 1; err == nil && res.State == coder.TurnAsking && n <= maxPermissionPrompts; n++ {
		if env.Approvals == nil {
			notes = append(notes, "Its permission prompts go to a person, and nobody can be asked here: the prompt stays open.")
			break
		}
		d, aerr := env.Approvals.Approve(ctx, fmt.Sprintf("%s#%d", env.CallID, n), conch.ApprovalRequest{
			Kind: "coder", Title: question(res.Text), Detail: "What its screen shows:\n\n```\n" + tailLines(res.Text, 15) + "\n```",
			Scope: "coder:" + o.Profile.Name,
		})
		if aerr != nil {
			return res, notes, aerr
		}
		who := orSomeone(d.By)
		switch {
		case d.Choice.Allows():
			notes = append(notes, fmt.Sprintf("Permission prompt %d: allowed (%s) by %s.", n, d.Choice.Label(), who))
		case d.Reason == conch.ApprovalReasonTimeout:
			notes = append(notes, fmt.Sprintf("Permission prompt %d: denied, nobody answered in time.", n))
		default:
			notes = append(notes, fmt.Sprintf("Permission prompt %d: denied by %s. Do not ask the coding agent to do it another way; ask the person what they want.", n, who))
		}
		res, err = c.Respond(ctx, o.Profile.PermitKey(d.Choice.Allows(), d.Choice == conch.ApproveConversation), progress(env))
	}
	return res, notes, err
}

// withNotes adds the decisions on permission prompts to a tool's output.
func withNotes(out conch.ToolOutput, err error) func([]string) (conch.ToolOutput, error) {
	return func(notes []string) (conch.ToolOutput, error) {
		if err == nil && len(notes) > 0 {
			out.Content = strings.Join(notes, "\n") + "\n\n" + out.Content
		}
		return out, err
	}
}

// question is the line of a CLI's screen that asks.
func question(screen string) string {
	lines := strings.Split(strings.TrimSpace(screen), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); strings.HasSuffix(l, "?") {
			return l
		}
	}
	return "The coding agent asks permission"
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.ReplaceAll(strings.Join(lines, "\n"), "```", "ʼʼʼ")
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
