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
	"conch/internal/backoff"
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
	// ContextWindow is the model's context window in tokens; 0 leaves the
	// context unmanaged (no compaction, ContextUse without a window).
	ContextWindow int
	// Context, when set with a ContextWindow, is where the model's view of
	// the conversation (summary + recent messages) is read and summaries
	// are stored; Run then reads the history itself instead of
	// Input.History. *sqlite.DB satisfies it.
	Context conch.ContextStore
	// MaxTurns caps model calls per turn (default 25).
	MaxTurns int
	// MaxToolErrors stops the loop after this many consecutive tool errors (default 3).
	MaxToolErrors int
	Retry         RetryPolicy
	// PreStop, when set, is asked before a final answer is given (the
	// pre-stop hooks): each line it returns is an open issue, handed back to
	// the model as a user-role note to address before it may finish, at
	// most MaxPreStopRounds times per turn. Nil or no lines: the answer stands.
	PreStop func(ctx context.Context, turn conch.TurnID, env conch.ToolEnv, answer string) []string
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
		opts.Sleep = backoff.Sleep
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
	// With Options.Context and a ContextWindow, Run reads the model's view
	// (summary + recent messages) from the store instead; History is then
	// used only when that view is empty.
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
	key := in.Env.Conversation
	managed := a.opts.Context != nil && a.window() > 0 && key != (conch.ConversationKey{})
	var view contextView
	if managed {
		if view, err = a.loadView(ctx, key); err != nil {
			return Result{}, err
		}
	}
	if len(view.msgs) == 0 {
		managed = false
		view = contextView{msgs: repairHistory(in.History)}
	}
	if len(view.msgs) == 0 {
		return Result{}, errors.New("run turn: empty history")
	}
	// A turn resumed after its answer was stored but before it was
	// delivered has nothing left to compute.
	if last := view.msgs[len(view.msgs)-1]; last.Role == conch.RoleAssistant && len(last.ToolCalls) == 0 && last.Text != "" {
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
		// lastTokens is the provider's count of the previous call (input +
		// output), lastLen the view's length right after its answer.
		lastTokens, lastLen int
		preStops            int
	)
	if managed {
		// The provider's count of the conversation's newest call (maybe
		// from an earlier turn or before a restart) plus this turn's
		// messages: those added since the call, or more.
		st, err := a.opts.Context.ContextStatus(ctx, key)
		if err != nil {
			return Result{}, fmt.Errorf("load context status: %w", err)
		}
		if st.Tokens > 0 {
			lastTokens, lastLen = st.Tokens, len(view.msgs)
			for lastLen > 0 && view.pos[lastLen-1].Turn == in.Turn {
				lastLen--
			}
		}
	}
	add := func(m conch.Message) {
		view.msgs = append(view.msgs, m)
		if view.pos != nil {
			view.pos = append(view.pos, conch.HistoryPos{Turn: in.Turn})
		}
	}
	for turn := 0; turn < a.opts.MaxTurns; turn++ {
		req := conch.ModelRequest{
			System: withSummary(system, view.summary), Messages: a.requestMessages(view, in.Turn), Tools: a.specs, MaxTokens: a.opts.MaxTokens,
		}
		used := estimateRequest(req)
		if lastTokens > 0 {
			used = max(used, lastTokens+estimateMessages(view.msgs[lastLen:]))
		}
		if managed && used > int(float64(a.window())*CompactAt) {
			v, calls, err := a.compact(ctx, in.Turn, key, used)
			res.ModelCalls += calls
			switch {
			case errors.Is(err, errNoCut):
				a.opts.Logger.Warn("context over the compaction threshold with nothing left to compact", "turn", in.Turn, "tokens", used, "window", a.window())
			case err != nil:
				return res, err
			default:
				view, lastTokens = v, 0
				req.System, req.Messages = withSummary(system, view.summary), a.requestMessages(view, in.Turn)
				if used = estimateRequest(req); used > int(float64(a.window())*CompactAt) {
					a.opts.Logger.Warn("context still over the compaction threshold after compacting", "turn", in.Turn, "tokens", used, "window", a.window())
				}
			}
		}
		resp, calls, err := a.generate(ctx, in.Turn, req, "", emit)
		res.ModelCalls += calls
		if err != nil {
			return res, err
		}
		use := conch.ContextUse{InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens, Window: a.window()}
		if use.InputTokens == 0 {
			use.InputTokens = used
		}
		emit(use)
		if managed {
			if err := a.opts.Context.RecordContextUse(context.WithoutCancel(ctx), key, use); err != nil {
				a.opts.Logger.Error("record context use", "turn", in.Turn, "err", err)
			}
		}
		lastTokens = resp.Usage.InputTokens + resp.Usage.OutputTokens
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
			if note, ok := a.preStop(ctx, in.Turn, env, msg.Text, &preStops); ok {
				if err := a.opts.Recorder.AppendMessage(ctx, in.Turn, note); err != nil {
					return res, fmt.Errorf("record pre-stop issues: %w", err)
				}
				add(msg)
				lastLen = len(view.msgs)
				add(note)
				continue
			}
			res.Text = msg.Text
			return res, nil
		}
		if err := a.opts.Recorder.AppendMessage(ctx, in.Turn, msg); err != nil {
			return res, fmt.Errorf("record tool calls: %w", err)
		}
		add(msg)
		lastLen = len(view.msgs)

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
			add(tm)
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

// MaxPreStopRounds is how often one turn's answer is handed back for the
// issues of the pre-stop hooks.
const MaxPreStopRounds = 2

// preStop asks Options.PreStop about an answer; when it names open issues
// (and rounds are left) it returns the note that hands them back.
func (a *Agent) preStop(ctx context.Context, turn conch.TurnID, env conch.ToolEnv, answer string, rounds *int) (conch.Message, bool) {
	if a.opts.PreStop == nil || *rounds >= MaxPreStopRounds {
		return conch.Message{}, false
	}
	issues := a.opts.PreStop(ctx, turn, env, answer)
	if len(issues) == 0 || ctx.Err() != nil {
		return conch.Message{}, false
	}
	*rounds++
	var b strings.Builder
	b.WriteString("[conch pre-stop check] Before you finish, address these open issues (then answer again):\n")
	for _, is := range issues {
		b.WriteString("- " + is + "\n")
	}
	a.opts.Logger.Info("pre-stop hooks returned issues", "turn", turn, "issues", len(issues), "round", *rounds)
	return conch.Message{Role: conch.RoleUser, Text: strings.TrimRight(b.String(), "\n")}, true
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
// purpose is recorded with the call ("" for the turn's own calls,
// "summary" for compaction).
func (a *Agent) generate(ctx context.Context, turn conch.TurnID, req conch.ModelRequest, purpose string, emit conch.EventSink) (conch.ModelResponse, int, error) {
	for attempt := 1; ; attempt++ {
		start := a.opts.Now()
		resp, err := a.call(ctx, req, emit)
		if err == nil {
			d := a.opts.Now().Sub(start)
			a.record(ctx, turn, conch.StepModelCall, ModelCallDetail{
				Model: resp.Model, DurationMS: d.Milliseconds(),
				InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens,
				StopReason: resp.StopReason, ToolCalls: len(resp.ToolCalls), Purpose: purpose,
			})
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
