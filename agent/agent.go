// Package agent runs the tool-calling loop of one turn: it calls the model,
// runs the tools it asks for, records every step, retries transient model
// failures and stops on the circuit breakers of seed 002.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"conch"
)

// Recorder persists what a turn produces. conch.TurnStore satisfies it.
type Recorder interface {
	AppendMessage(ctx context.Context, id conch.TurnID, m conch.Message) error
	RecordStep(ctx context.Context, s conch.Step) error
}

// Options configures an Agent.
type Options struct {
	Model    conch.Model
	Tools    []conch.Tool
	Recorder Recorder
	// Facts, when set, is read into the system prompt's <memory> block.
	Facts conch.FactStore
	// Skills, when set, returns the <available_skills> block of a turn's
	// system prompt ("" for none); it reports its own failures.
	Skills func(ctx context.Context, env conch.ToolEnv) string
	// SystemPrompt replaces DefaultSystemPrompt when set.
	SystemPrompt string
	MaxTokens    int
	// MaxTurns caps model calls per turn (default 25).
	MaxTurns int
	// MaxToolErrors stops the loop after this many consecutive tool errors (default 3).
	MaxToolErrors int
	Retry         RetryPolicy
	// Sleep waits for d or until ctx is done; injectable for tests.
	Sleep  func(ctx context.Context, d time.Duration) error
	Now    func() time.Time
	Logger *slog.Logger
}

// Agent runs turns. It is safe for concurrent use by many conversations.
type Agent struct {
	opts  Options
	tools map[string]conch.Tool
	specs []conch.ToolSpec
	rnd   func() float64
}

// New returns an Agent; tool names must be unique.
func New(opts Options) (*Agent, error) {
	if opts.Model == nil {
		return nil, errors.New("agent: no model")
	}
	if opts.Recorder == nil {
		return nil, errors.New("agent: no recorder")
	}
	if opts.MaxTurns <= 0 {
		opts.MaxTurns = 25
	}
	if opts.MaxToolErrors <= 0 {
		opts.MaxToolErrors = 3
	}
	if opts.Retry.Base <= 0 {
		opts.Retry.Base = time.Second
	}
	if opts.Retry.Cap <= 0 {
		opts.Retry.Cap = time.Minute
	}
	if opts.Sleep == nil {
		opts.Sleep = sleep
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	a := &Agent{opts: opts, tools: make(map[string]conch.Tool), rnd: defaultRand}
	for _, t := range opts.Tools {
		s := t.Spec()
		if _, dup := a.tools[s.Name]; dup {
			return nil, fmt.Errorf("agent: duplicate tool %q", s.Name)
		}
		a.tools[s.Name] = t
		a.specs = append(a.specs, s)
	}
	return a, nil
}

// Tools returns the specs of the registered tools.
func (a *Agent) Tools() []conch.ToolSpec { return a.specs }

// Input is one turn to run.
type Input struct {
	Turn conch.TurnID
	// History is the conversation so far, ending with the turn's user
	// message and whatever the turn already produced before a restart.
	History []conch.Message
	Env     conch.ToolEnv
	// Events receives typed events as the turn runs; may be nil.
	Events conch.EventSink
}

// StopReason says why a turn ended without a normal answer.
type StopReason string

// Stop reasons, recorded in the store.
const (
	StopNone          StopReason = ""
	StopRepeatedCall  StopReason = "repeated_tool_call"
	StopToolErrors    StopReason = "consecutive_tool_errors"
	StopMaxTurns      StopReason = "max_turns"
	StopModelMaxToken StopReason = "model_max_tokens"
)

// Result is how a turn ended. Text is what the user should read.
type Result struct {
	Text    string
	Stopped StopReason
	// ModelCalls counts calls to the model, retries included.
	ModelCalls int
}

// Run runs one turn. A non-nil error means the turn could not finish (a
// fatal model error, exhausted retries, a broken tool, cancellation);
// conch.UserMessage(err) is the text to show.
func (a *Agent) Run(ctx context.Context, in Input) (Result, error) {
	system, err := a.systemPrompt(ctx, in.Env)
	if err != nil {
		return Result{}, err
	}
	history := repairHistory(in.History)
	// A turn resumed after its answer was stored but before it was
	// delivered has nothing left to compute.
	if last := history[len(history)-1]; last.Role == conch.RoleAssistant && len(last.ToolCalls) == 0 && last.Text != "" {
		return Result{Text: last.Text}, nil
	}
	emit := in.Events
	if emit == nil {
		emit = func(conch.EventData) {}
	}
	env := in.Env
	if env.Progress == nil {
		env.Progress = func(text string) { emit(conch.ToolProgress{Text: text}) }
	}

	var (
		res        Result
		lastCall   string
		toolErrors int
	)
	for turn := 0; turn < a.opts.MaxTurns; turn++ {
		resp, calls, err := a.generate(ctx, in.Turn, conch.ModelRequest{
			System: system, Messages: history, Tools: a.specs, MaxTokens: a.opts.MaxTokens,
		}, emit)
		res.ModelCalls += calls
		if err != nil {
			return res, err
		}
		msg := conch.Message{Role: conch.RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls}
		if len(resp.ToolCalls) == 0 {
			if resp.Text == "" {
				msg.Text = "(The model returned an empty answer.)"
			}
			if resp.StopReason == conch.StopMaxTokens {
				msg.Text += "\n\n(The answer was cut off at the model's output limit.)"
			}
			if err := a.opts.Recorder.AppendMessage(ctx, in.Turn, msg); err != nil {
				return res, fmt.Errorf("record answer: %w", err)
			}
			res.Text = msg.Text
			return res, nil
		}
		if err := a.opts.Recorder.AppendMessage(ctx, in.Turn, msg); err != nil {
			return res, fmt.Errorf("record tool calls: %w", err)
		}
		history = append(history, msg)

		for i, call := range resp.ToolCalls {
			sig := call.Name + "\x00" + canonicalJSON(call.Arguments)
			if sig == lastCall {
				// Answer the remaining calls so the history stays valid.
				a.skipCalls(ctx, in.Turn, resp.ToolCalls[i:], "not run: the same call was just made")
				return a.stop(ctx, in.Turn, res, StopRepeatedCall,
					fmt.Sprintf("I stopped because I was about to repeat the same `%s` call twice in a row, which means I was stuck. Tell me how you would like to proceed.", call.Name))
			}
			lastCall = sig
			out, err := a.runTool(ctx, in.Turn, env, call, emit)
			if err != nil {
				a.skipCalls(ctx, in.Turn, resp.ToolCalls[i:], "not run: the turn ended with an error")
				return res, err
			}
			tm := conch.Message{Role: conch.RoleTool, ToolResult: &conch.ToolResult{
				CallID: call.ID, Name: call.Name, Content: out.Content, IsError: out.IsError,
			}}
			if err := a.opts.Recorder.AppendMessage(ctx, in.Turn, tm); err != nil {
				return res, fmt.Errorf("record tool result: %w", err)
			}
			history = append(history, tm)
			if out.IsError {
				toolErrors++
			} else {
				toolErrors = 0
			}
			if toolErrors >= a.opts.MaxToolErrors {
				a.skipCalls(ctx, in.Turn, resp.ToolCalls[i+1:], "not run: too many tool errors in a row")
				return a.stop(ctx, in.Turn, res, StopToolErrors,
					fmt.Sprintf("I stopped after %d tool errors in a row. The last one (`%s`) said:\n\n%s", toolErrors, call.Name, clip(out.Content, 500)))
			}
		}
	}
	return a.stop(ctx, in.Turn, res, StopMaxTurns,
		fmt.Sprintf("I stopped after %d steps without finishing (the configured limit). Say \"continue\" to let me go on.", a.opts.MaxTurns))
}

// stop ends the turn through a breaker: the reason is recorded as a step and
// the user's message is stored as the assistant's answer.
func (a *Agent) stop(ctx context.Context, turn conch.TurnID, res Result, reason StopReason, text string) (Result, error) {
	a.record(ctx, turn, conch.StepStopped, StoppedDetail{Reason: reason})
	if err := a.opts.Recorder.AppendMessage(ctx, turn, conch.Message{Role: conch.RoleAssistant, Text: text}); err != nil {
		return res, fmt.Errorf("record stop: %w", err)
	}
	a.opts.Logger.Info("turn stopped by breaker", "turn", turn, "reason", reason)
	res.Text, res.Stopped = text, reason
	return res, nil
}

// skipCalls answers calls that will not run, so every tool call in the
// history has its result (providers reject dangling calls).
func (a *Agent) skipCalls(ctx context.Context, turn conch.TurnID, calls []conch.ToolCall, why string) {
	for _, c := range calls {
		m := conch.Message{Role: conch.RoleTool, ToolResult: &conch.ToolResult{CallID: c.ID, Name: c.Name, Content: why, IsError: true}}
		if err := a.opts.Recorder.AppendMessage(context.WithoutCancel(ctx), turn, m); err != nil {
			a.opts.Logger.Error("record skipped tool call", "turn", turn, "err", err)
		}
	}
}

// generate calls the model, retrying transient failures with backoff.
func (a *Agent) generate(ctx context.Context, turn conch.TurnID, req conch.ModelRequest, emit conch.EventSink) (conch.ModelResponse, int, error) {
	for attempt := 1; ; attempt++ {
		start := a.opts.Now()
		resp, err := a.call(ctx, req, emit)
		if err == nil {
			d := a.opts.Now().Sub(start)
			a.record(ctx, turn, conch.StepModelCall, ModelCallDetail{
				Model: resp.Model, DurationMS: d.Milliseconds(),
				InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens,
				StopReason: resp.StopReason, ToolCalls: len(resp.ToolCalls),
			})
			emit(conch.ContextUse{InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens})
			return resp, attempt, nil
		}
		kind := classify(ctx, err)
		a.record(ctx, turn, conch.StepModelError, ModelErrorDetail{Kind: kind, Error: err.Error(), Attempt: attempt})
		if ctx.Err() != nil {
			return resp, attempt, fmt.Errorf("model call: %w", context.Cause(ctx))
		}
		if kind != conch.KindTransient {
			a.opts.Logger.Warn("model call failed", "turn", turn, "kind", kind, "err", err)
			return resp, attempt, fmt.Errorf("model call: %w", err)
		}
		if attempt > a.opts.Retry.Max {
			a.opts.Logger.Warn("model call failed, retries exhausted", "turn", turn, "attempts", attempt, "err", err)
			return resp, attempt, fmt.Errorf("model call after %d attempts: %w", attempt, err)
		}
		d := a.opts.Retry.delay(attempt, retryAfter(err), a.rnd)
		if d > a.opts.Retry.Cap {
			return resp, attempt, fmt.Errorf("model call: server asks to wait %s, longer than retry cap %s: %w", d, a.opts.Retry.Cap, err)
		}
		a.opts.Logger.Info("model call failed, retrying", "turn", turn, "attempt", attempt, "delay", d, "err", err)
		emit(conch.RetryEvent{Attempt: attempt, Max: a.opts.Retry.Max, Delay: d, Reason: shortErr(err)})
		if err := a.opts.Sleep(ctx, d); err != nil {
			return resp, attempt, fmt.Errorf("model call: %w", context.Cause(ctx))
		}
	}
}

// call asks the model once, streaming its text as events when it can.
func (a *Agent) call(ctx context.Context, req conch.ModelRequest, emit conch.EventSink) (conch.ModelResponse, error) {
	if sm, ok := a.opts.Model.(conch.StreamingModel); ok {
		return sm.GenerateStream(ctx, req, func(delta string) {
			if delta != "" {
				emit(conch.TextDelta{Text: delta})
			}
		})
	}
	return a.opts.Model.Generate(ctx, req)
}

// runTool runs one call. Unknown tools and bad arguments are failures the
// model reads; a Go error from the tool ends the turn.
func (a *Agent) runTool(ctx context.Context, turn conch.TurnID, env conch.ToolEnv, call conch.ToolCall, emit conch.EventSink) (conch.ToolOutput, error) {
	a.record(ctx, turn, conch.StepToolCall, ToolCallDetail{ID: call.ID, Name: call.Name, Arguments: json.RawMessage(orEmptyObject(call.Arguments))})
	emit(conch.ToolStarted{CallID: call.ID, Name: call.Name, Summary: describeCall(call)})
	start := a.opts.Now()
	var out conch.ToolOutput
	var err error
	tool, ok := a.tools[call.Name]
	switch {
	case !ok:
		out = conch.ToolFail(fmt.Sprintf("unknown tool %q; available tools: %s", call.Name, strings.Join(a.toolNames(), ", ")))
	case !json.Valid(orEmptyObject(call.Arguments)):
		out = conch.ToolFail(fmt.Sprintf("the arguments of %s are not valid JSON: %s", call.Name, clip(string(call.Arguments), 200)))
	default:
		out, err = tool.Run(ctx, env, orEmptyObject(call.Arguments))
	}
	took := a.opts.Now().Sub(start)
	detail := ToolResultDetail{ID: call.ID, Name: call.Name, DurationMS: took.Milliseconds(), IsError: out.IsError, Bytes: len(out.Content), ExitCode: out.ExitCode}
	if err != nil {
		detail.Error = err.Error()
	}
	a.record(ctx, turn, conch.StepToolResult, detail)
	emit(conch.ToolFinished{CallID: call.ID, Name: call.Name, Duration: took, IsError: out.IsError || err != nil, ExitCode: out.ExitCode, Summary: clip(firstLine(out.Content), 200)})
	if err != nil {
		if ctx.Err() != nil {
			return out, fmt.Errorf("tool %s: %w", call.Name, context.Cause(ctx))
		}
		a.opts.Logger.Error("tool failed", "turn", turn, "tool", call.Name, "err", err)
		return out, fmt.Errorf("tool %s: %w", call.Name, err)
	}
	return out, nil
}

func (a *Agent) toolNames() []string {
	names := make([]string, len(a.specs))
	for i, s := range a.specs {
		names[i] = s.Name
	}
	return names
}

// record stores a step; a failure to record is logged, not fatal, because
// the messages that matter for resumption are stored separately.
func (a *Agent) record(ctx context.Context, turn conch.TurnID, kind conch.StepKind, detail any) {
	b, err := json.Marshal(detail)
	if err != nil {
		a.opts.Logger.Error("encode step", "kind", kind, "err", err)
		return
	}
	if err := a.opts.Recorder.RecordStep(context.WithoutCancel(ctx), conch.Step{Turn: turn, Kind: kind, Detail: b, At: a.opts.Now()}); err != nil {
		a.opts.Logger.Error("record step", "kind", kind, "err", err)
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
