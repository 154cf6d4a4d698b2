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
	"slices"
	"strings"
	"time"

	"conch"
	"conch/internal/backoff"
)

// Store is a conversation's record as a turn reads and writes it: the
// model's view through the turn, and what the turn produces. *sqlite.DB
// satisfies it.
type Store interface {
	// ModelHistory returns the model's view of the conversation through a
	// turn (never a later turn's messages).
	ModelHistory(ctx context.Context, key conch.ConversationKey, through conch.TurnID) (conch.ModelHistory, error)
	AppendMessage(ctx context.Context, id conch.TurnID, m conch.Message) error
	RecordStep(ctx context.Context, s conch.Step) error
}

// Options configures an Agent.
type Options struct {
	Model conch.Model
	Tools []conch.Tool
	// ToolSource, when set, adds tools for one turn (an MCP server's, for
	// the conversation it is offered to); asked once at the start of each
	// turn. A tool named like one of Tools is left out and logged: a
	// built-in is never shadowed.
	ToolSource func(ctx context.Context, env conch.ToolEnv) []conch.Tool
	// Store is where a turn reads the model's view of its conversation and
	// records its messages and steps.
	Store Store
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
	// Context, when set with a ContextWindow, manages the context: summaries
	// of older turns are stored there and the newest request's size kept.
	// *sqlite.DB satisfies it.
	Context conch.ContextStore
	// Fallbacks take over, in order, for the rest of a turn when the model
	// in use is rate-limited, overloaded or down after its retries.
	Fallbacks []Fallback
	// Vision says the model sees pictures; without it a message's pictures
	// are named in its text instead (llm.Vision, overridable in config).
	Vision bool
	// Media keeps pictures by reference: those of received files (the
	// gateway prepared them) and those tools return. Nil: pictures are
	// named, never sent.
	Media conch.AttachmentStore
	// Meter, when set, is asked before each model call of a turn whether a
	// budget allows it, and told every answered call's usage.
	Meter Meter
	// MaxTurns caps model calls per turn (default 25).
	MaxTurns int
	// MaxToolErrors stops the loop after this many consecutive tool errors (default 3).
	MaxToolErrors int
	Retry         RetryPolicy
	// PreStop, when set, is asked before a final answer is given (the
	// pre-stop hooks): each line it returns is an open issue, handed back to
	// the model as a user-role note to address before it may finish, at
	// most MaxPreStopRounds times per turn. Nil or no lines: the answer stands.
	// The stage's summary is emitted as an event when hooks ran.
	PreStop func(ctx context.Context, turn conch.TurnID, env conch.ToolEnv, answer string) conch.HookRan
	// Approvals, when set, lets a resumed turn go on at a tool call that
	// was waiting for a person's answer when conch stopped (resume.go).
	Approvals TurnApprovals
	// Secrets are replaced by Redacted in every tool result, tool error and
	// progress line before the model, the store or any channel sees them
	// (defence in depth: the configured API keys, tokens and passwords).
	// Secrets shorter than MinSecretLen are ignored.
	Secrets []string
	// Sleep waits for d or until ctx is done; injectable for tests.
	Sleep  func(ctx context.Context, d time.Duration) error
	Now    func() time.Time
	Logger *slog.Logger
}

// Fallback is a model that takes over when the one before it fails.
type Fallback struct {
	Model conch.Model
	// ContextWindow is its window in tokens (0: the primary's).
	ContextWindow int
	// Vision says it sees pictures.
	Vision bool
}

// Meter counts what model calls cost and keeps the budgets. *usage.Meter
// satisfies it.
type Meter interface {
	// Check returns a *conch.BudgetError when the call (its usage an
	// estimate) would pass a limit; other errors are the Meter's own.
	Check(ctx context.Context, c conch.ModelCall) error
	// Record prices and keeps an answered call and returns it priced.
	Record(ctx context.Context, c conch.ModelCall) (conch.ModelCall, error)
}

// slot is a model the agent may call: the primary or a fallback.
type slot struct {
	model    conch.Model
	window   int
	fallback bool
	vision   bool
}

// caller is who a model call is made for: the turn, its conversation and
// person, and the model in use; usage events go to emit.
type caller struct {
	turn   conch.TurnID
	key    conch.ConversationKey
	person conch.UserKey
	slot   slot
	emit   conch.EventSink
}

// Agent runs turns. It is safe for concurrent use by many conversations.
type Agent struct {
	opts     Options
	models   []slot // the primary first
	tools    map[string]conch.Tool
	specs    []conch.ToolSpec
	rnd      func() float64
	redactor *strings.Replacer // nil when there are no secrets
	images   imageCache
}

// New returns an Agent; tool names must be unique.
func New(opts Options) (*Agent, error) {
	if opts.Model == nil {
		return nil, errors.New("agent: no model")
	}
	if opts.Store == nil {
		return nil, errors.New("agent: no store")
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
	a := &Agent{opts: opts, tools: make(map[string]conch.Tool), rnd: defaultRand, redactor: newRedactor(opts.Secrets)}
	a.models = []slot{{model: opts.Model, window: opts.ContextWindow, vision: opts.Vision}}
	for i, f := range opts.Fallbacks {
		if f.Model == nil {
			return nil, fmt.Errorf("agent: fallback %d has no model", i+1)
		}
		w := f.ContextWindow
		if w <= 0 {
			w = opts.ContextWindow
		}
		a.models = append(a.models, slot{model: f.Model, window: w, fallback: true, vision: f.Vision})
	}
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

// Input is one turn to run: the turn (its message is stored), the tool
// environment, whose Conversation names the conversation, and where its
// events go. Run reads the model's view from the store itself: the
// conversation through this turn, with whatever the turn produced before a
// restart.
type Input struct {
	Turn conch.TurnID
	Env  conch.ToolEnv
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
	// StopBudget: the next model call would have passed a budget.
	StopBudget StopReason = "budget"
)

// Result is how a turn ended. Text is what the user should read.
type Result struct {
	Text    string
	Stopped StopReason
	// ModelCalls counts calls to the model, retries included.
	ModelCalls int
	// Model is the model that answered last ("provider/name"), Fallback
	// set when it was not the primary.
	Model    string
	Fallback bool
	// Attachments are the files the turn's tools queued for the answer
	// (send_file), in order; read back from the stored tool results when
	// the turn resumes.
	Attachments []conch.Attachment
}

// Run runs one turn. A non-nil error means the turn could not finish (a
// fatal model error, exhausted retries, a broken tool, cancellation);
// conch.UserMessage(err) is the text to show.
func (a *Agent) Run(ctx context.Context, in Input) (Result, error) {
	t, err := a.startTurn(ctx, in)
	if err != nil {
		return Result{}, err
	}
	if t.answered != "" {
		return Result{Text: t.answered, Attachments: t.files}, nil
	}
	if err := t.resumeWaiting(ctx); err != nil {
		return t.res, err
	}
	for step := 0; step < a.opts.MaxTurns; step++ {
		req, used, err := t.request(ctx)
		var be *conch.BudgetError
		if errors.As(err, &be) {
			return a.stop(ctx, in.Turn, t.res, StopBudget, be.Text, t.files...)
		}
		if err != nil {
			return t.res, err
		}
		resp, err := t.generate(ctx, req, used)
		if err != nil && t.fallBack(ctx, err) {
			continue
		}
		if err != nil {
			return t.res, err
		}
		if len(resp.ToolCalls) == 0 {
			done, err := t.answer(ctx, resp)
			if err != nil {
				return t.res, err
			}
			if done {
				return t.res, nil
			}
			continue
		}
		if res, done, err := t.toolCalls(ctx, resp); done {
			return res, err
		}
	}
	return a.stop(ctx, in.Turn, t.res, StopMaxTurns,
		fmt.Sprintf("I stopped after %d steps without finishing (the configured limit). Say \"continue\" to let me go on.", a.opts.MaxTurns), t.files...)
}

// MaxPreStopRounds is how often one turn's answer is handed back for the
// issues of the pre-stop hooks.
const MaxPreStopRounds = 2

// preStop asks Options.PreStop about an answer; when it names open issues
// (and rounds are left) it returns the note that hands them back.
func (a *Agent) preStop(ctx context.Context, turn conch.TurnID, env conch.ToolEnv, answer string, rounds *int, emit conch.EventSink) (conch.Message, bool) {
	if a.opts.PreStop == nil || *rounds >= MaxPreStopRounds {
		return conch.Message{}, false
	}
	ran := a.opts.PreStop(ctx, turn, env, answer)
	if ran.Hooks > 0 {
		emit(ran)
	}
	issues := ran.Issues
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
	return conch.Message{Role: conch.RoleUser, Note: true, Text: strings.TrimRight(b.String(), "\n")}, true
}

// stop ends the turn through a breaker: the reason is recorded as a step and
// the user's message is stored as the assistant's answer.
func (a *Agent) stop(ctx context.Context, turn conch.TurnID, res Result, reason StopReason, text string, files ...conch.Attachment) (Result, error) {
	a.record(ctx, turn, conch.StepStopped, StoppedDetail{Reason: reason})
	if err := a.opts.Store.AppendMessage(ctx, turn, conch.Message{Role: conch.RoleAssistant, Text: text}); err != nil {
		return res, fmt.Errorf("record stop: %w", err)
	}
	a.opts.Logger.Info("turn stopped by breaker", "turn", turn, "reason", reason)
	res.Text, res.Stopped = text, reason
	if res.Attachments == nil {
		res.Attachments = files
	}
	return res, nil
}

// skipCalls answers calls that will not run, so every tool call in the
// history has its result (providers reject dangling calls).
func (a *Agent) skipCalls(ctx context.Context, turn conch.TurnID, calls []conch.ToolCall, why string) {
	for _, c := range calls {
		m := conch.Message{Role: conch.RoleTool, ToolResult: &conch.ToolResult{CallID: c.ID, Name: c.Name, Content: why, IsError: true}}
		if err := a.opts.Store.AppendMessage(context.WithoutCancel(ctx), turn, m); err != nil {
			a.opts.Logger.Error("record skipped tool call", "turn", turn, "err", err)
		}
	}
}

// generate calls the model, retrying transient failures with backoff.
// purpose is recorded with the call ("" for the turn's own calls,
// "summary" for compaction).
func (a *Agent) generate(ctx context.Context, c caller, req conch.ModelRequest, purpose string, emit conch.EventSink) (conch.ModelResponse, int, error) {
	turn := c.turn
	for attempt := 1; ; attempt++ {
		start := a.opts.Now()
		resp, err := a.call(ctx, c.slot.model, req, emit)
		if err == nil {
			d := a.opts.Now().Sub(start)
			if resp.Usage.InputTokens == 0 && resp.Usage.OutputTokens == 0 {
				// The provider reported nothing: count our estimate, marked.
				resp.Usage = conch.Usage{InputTokens: estimateRequest(req), OutputTokens: estimateAnswer(resp), Estimated: true}
			}
			cost := a.meter(ctx, c, purpose, resp.Usage)
			a.record(ctx, turn, conch.StepModelCall, ModelCallDetail{
				Model: resp.Model, Via: c.slot.model.Name(), Fallback: c.slot.fallback, DurationMS: d.Milliseconds(),
				InputTokens: resp.Usage.InputTokens, CachedTokens: resp.Usage.CachedTokens, OutputTokens: resp.Usage.OutputTokens,
				Estimated: resp.Usage.Estimated, CostUSD: cost,
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

// meter records an answered call's usage with the Meter and emits it; it
// returns the call's price (0 without a Meter or a price).
func (a *Agent) meter(ctx context.Context, c caller, purpose string, u conch.Usage) float64 {
	call := conch.ModelCall{At: a.opts.Now(), Key: c.key, Turn: c.turn, Person: c.person,
		Model: c.slot.model.Name(), Purpose: purpose, Fallback: c.slot.fallback, Usage: u}
	if a.opts.Meter != nil {
		priced, err := a.opts.Meter.Record(context.WithoutCancel(ctx), call)
		if err != nil {
			a.opts.Logger.Error("record usage", "turn", c.turn, "err", err)
		}
		call = priced
	}
	if c.emit != nil {
		c.emit(conch.ModelUsage{Model: call.Model, Fallback: call.Fallback, InputTokens: u.InputTokens, CachedTokens: u.CachedTokens,
			OutputTokens: u.OutputTokens, Estimated: u.Estimated, CostUSD: call.CostUSD})
	}
	return call.CostUSD
}

// call asks the model once, streaming its text as events when it can.
func (a *Agent) call(ctx context.Context, m conch.Model, req conch.ModelRequest, emit conch.EventSink) (conch.ModelResponse, error) {
	if sm, ok := m.(conch.StreamingModel); ok {
		return sm.GenerateStream(ctx, req, func(delta string) {
			if delta != "" {
				emit(conch.TextDelta{Text: delta})
			}
		})
	}
	return m.Generate(ctx, req)
}

// runTool runs one call. Unknown tools and bad arguments are failures the
// model reads; a Go error from the tool ends the turn.
func (a *Agent) runTool(ctx context.Context, turn conch.TurnID, ts turnTools, env conch.ToolEnv, call conch.ToolCall, emit conch.EventSink) (conch.ToolOutput, error) {
	a.record(ctx, turn, conch.StepToolCall, ToolCallDetail{ID: call.ID, Name: call.Name, Arguments: json.RawMessage(orEmptyObject(call.Arguments))})
	emit(conch.ToolStarted{CallID: call.ID, Name: call.Name, Summary: a.redact(describeCall(call))})
	start := a.opts.Now()
	var out conch.ToolOutput
	var err error
	tool, ok := ts.byName[call.Name]
	switch {
	case !ok:
		out = conch.ToolFail(fmt.Sprintf("unknown tool %q; available tools: %s", call.Name, strings.Join(ts.names(), ", ")))
	case !json.Valid(orEmptyObject(call.Arguments)):
		out = conch.ToolFail(fmt.Sprintf("the arguments of %s are not valid JSON: %s", call.Name, clip(string(call.Arguments), 200)))
	default:
		env.CallID = call.ID
		out, err = tool.Run(ctx, env, orEmptyObject(call.Arguments))
		out.Content, err = a.redact(out.Content), a.redactErr(err)
	}
	took := a.opts.Now().Sub(start)
	detail := ToolResultDetail{ID: call.ID, Name: call.Name, DurationMS: took.Milliseconds(), IsError: out.IsError, Bytes: len(out.Content), ExitCode: out.ExitCode}
	if err != nil {
		detail.Error = err.Error()
	}
	a.record(ctx, turn, conch.StepToolResult, detail)
	emit(conch.ToolFinished{CallID: call.ID, Name: call.Name, Duration: took, IsError: out.IsError || err != nil, ExitCode: out.ExitCode, Summary: clip(firstLine(out.Content), 200)})
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, conch.ErrAwaitingAnswer) {
			return out, fmt.Errorf("tool %s: %w", call.Name, context.Cause(ctx))
		}
		a.opts.Logger.Error("tool failed", "turn", turn, "tool", call.Name, "err", err)
		return out, fmt.Errorf("tool %s: %w", call.Name, err)
	}
	return out, nil
}

// turnTools are the tools of one turn: the built-ins and what the
// ToolSource added.
type turnTools struct {
	byName map[string]conch.Tool
	specs  []conch.ToolSpec
}

func (ts turnTools) names() []string {
	names := make([]string, len(ts.specs))
	for i, s := range ts.specs {
		names[i] = s.Name
	}
	return names
}

// turnTools returns the built-in tools with the ToolSource's for env.
func (a *Agent) turnTools(ctx context.Context, env conch.ToolEnv) turnTools {
	ts := turnTools{byName: a.tools, specs: a.specs}
	if a.opts.ToolSource == nil {
		return ts
	}
	extra := a.opts.ToolSource(ctx, env)
	if len(extra) == 0 {
		return ts
	}
	ts.byName = make(map[string]conch.Tool, len(a.tools)+len(extra))
	for k, v := range a.tools {
		ts.byName[k] = v
	}
	ts.specs = slices.Clone(a.specs)
	for _, t := range extra {
		s := t.Spec()
		if _, dup := ts.byName[s.Name]; dup {
			a.opts.Logger.Warn("a tool from the tool source is named like another and is left out", "tool", s.Name, "conversation", env.Conversation)
			continue
		}
		ts.byName[s.Name] = t
		ts.specs = append(ts.specs, s)
	}
	return ts
}

// record stores a step; a failure to record is logged, not fatal, because
// the messages that matter for resumption are stored separately.
func (a *Agent) record(ctx context.Context, turn conch.TurnID, kind conch.StepKind, detail any) {
	b, err := json.Marshal(detail)
	if err != nil {
		a.opts.Logger.Error("encode step", "kind", kind, "err", err)
		return
	}
	if err := a.opts.Store.RecordStep(context.WithoutCancel(ctx), conch.Step{Turn: turn, Kind: kind, Detail: b, At: a.opts.Now()}); err != nil {
		a.opts.Logger.Error("record step", "kind", kind, "err", err)
	}
}
