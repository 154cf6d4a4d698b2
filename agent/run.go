package agent

import (
	"context"
	"errors"
	"fmt"

	"conch"
)

// turnRun is the state of one Run: the model's view of the conversation and
// the counters the breakers and the context estimate use.
type turnRun struct {
	a       *Agent
	in      Input
	key     conch.ConversationKey
	system  string
	managed bool
	view    contextView
	env     conch.ToolEnv
	emit    conch.EventSink
	// tools are the turn's tools: the built-ins and the ToolSource's.
	tools turnTools

	res  Result
	slot int // the model in use: 0 the primary, then the fallbacks
	// person is the turn's sender: usage and budgets count per person.
	person conch.UserKey

	lastCall   string
	toolErrors int
	// lastTokens is the provider's count of the previous call (input +
	// output), lastLen the view's length right after its answer.
	lastTokens, lastLen int
	preStops            int
	// answered is the stored answer of a turn resumed after it was stored
	// but before it was delivered; such a turn has nothing left to compute.
	answered string
	// files are the files this turn's tools queued for its answer: those
	// of its stored tool results at the start, then each new one.
	files []conch.Attachment
}

// startTurn prepares a turn: the system prompt, the model's view of the
// conversation through this turn (from the store), the event sink and the
// provider's last token count.
func (a *Agent) startTurn(ctx context.Context, in Input) (*turnRun, error) {
	t := &turnRun{a: a, in: in, key: in.Env.Conversation, person: in.Env.User}
	if t.key.IsZero() || in.Turn <= 0 {
		return nil, conch.Errorf(conch.KindInvalid, "run turn %d: no conversation or turn", in.Turn)
	}
	t.managed = a.opts.Context != nil && a.window() > 0
	var err error
	if t.view, err = a.loadView(ctx, t.key, in.Turn); err != nil {
		return nil, err
	}
	if !t.view.holdsTurn(in.Turn) {
		return nil, fmt.Errorf("run turn %d: its message is not in the history of %s", in.Turn, t.key)
	}
	t.files = t.view.turnFiles(in.Turn)
	// A turn counts as answered only by its own stored final answer (one
	// resumed after the answer was stored but before it was delivered):
	// it has nothing left to compute.
	if n := len(t.view.msgs); t.view.pos[n-1].Turn == in.Turn {
		if last := t.view.msgs[n-1]; last.Role == conch.RoleAssistant && len(last.ToolCalls) == 0 && last.Text != "" {
			t.answered = last.Text
			return t, nil
		}
	}
	if t.system, err = a.systemPrompt(ctx, in.Env); err != nil {
		return nil, err
	}
	t.emit = in.Events
	if t.emit == nil {
		t.emit = func(conch.EventData) {}
	}
	t.env = in.Env
	if t.env.Progress == nil {
		emit := t.emit
		t.env.Progress = func(text string) { emit(conch.ToolProgress{Text: text}) }
	}
	if a.redactor != nil {
		progress := t.env.Progress
		t.env.Progress = func(text string) { progress(a.redact(text)) }
	}
	t.tools = a.turnTools(ctx, t.env)
	if t.managed {
		if err := t.loadStatus(ctx); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// loadStatus starts the estimate from the provider's count of the
// conversation's newest call (maybe from an earlier turn or before a
// restart) plus this turn's messages: those added since the call, or more.
func (t *turnRun) loadStatus(ctx context.Context) error {
	st, err := t.a.opts.Context.ContextStatus(ctx, t.key)
	if err != nil {
		return fmt.Errorf("load context status: %w", err)
	}
	if st.Tokens > 0 {
		t.lastTokens, t.lastLen = st.Tokens, len(t.view.msgs)
		for t.lastLen > 0 && t.view.pos[t.lastLen-1].Turn == t.in.Turn {
			t.lastLen--
		}
	}
	return nil
}

// caller is who the turn's model calls are for, with the model in use.
func (t *turnRun) caller() caller {
	return caller{turn: t.in.Turn, key: t.key, person: t.person, slot: t.a.models[t.slot], emit: t.emit}
}

// window is the context window of the model in use.
func (t *turnRun) window() int { return t.a.models[t.slot].window }

// checkBudget asks the Meter whether the next call, of about used input
// tokens, may be made. Only a *conch.BudgetError stops the turn: a Meter
// that cannot read its store is logged, and the turn goes on.
func (t *turnRun) checkBudget(ctx context.Context, used int) error {
	a := t.a
	if a.opts.Meter == nil {
		return nil
	}
	s := a.models[t.slot]
	err := a.opts.Meter.Check(ctx, conch.ModelCall{At: a.opts.Now(), Key: t.key, Turn: t.in.Turn, Person: t.person,
		Model: s.model.Name(), Fallback: s.fallback, Usage: conch.Usage{InputTokens: used, Estimated: true}})
	var be *conch.BudgetError
	if err != nil && !errors.As(err, &be) {
		a.opts.Logger.Error("budget check failed; the call goes ahead", "turn", t.in.Turn, "err", err)
		return nil
	}
	return err
}

// fallBack hands the turn to the next model when the one in use is
// rate-limited, overloaded or down after its retries (a transient failure
// that outlasted them). The next request is built for the new model's
// window, so a smaller window compacts first.
func (t *turnRun) fallBack(ctx context.Context, err error) bool {
	a := t.a
	if ctx.Err() != nil || t.slot+1 >= len(a.models) {
		return false
	}
	if k := classify(ctx, err); k != conch.KindTransient && k != conch.KindUnavailable {
		return false
	}
	from, to := a.models[t.slot].model.Name(), a.models[t.slot+1].model.Name()
	t.slot++
	t.lastTokens = 0 // another provider counts differently
	a.record(ctx, t.in.Turn, conch.StepFallback, FallbackDetail{From: from, To: to, Error: shortErr(err)})
	a.opts.Logger.Warn("model unavailable, handing the turn to a fallback", "turn", t.in.Turn, "from", from, "to", to, "err", err)
	t.emit(conch.ToolProgress{Text: fmt.Sprintf("%s is unavailable; going on with %s.", from, to)})
	return true
}

// add appends a message of this turn to the model's view.
func (t *turnRun) add(m conch.Message) {
	t.view.msgs = append(t.view.msgs, m)
	if t.view.pos != nil {
		t.view.pos = append(t.view.pos, conch.HistoryPos{Turn: t.in.Turn})
	}
}

// request builds the next model request and estimates its size; when the
// context is managed and over the threshold it compacts first.
func (t *turnRun) request(ctx context.Context) (conch.ModelRequest, int, error) {
	a := t.a
	w := t.window()
	req := conch.ModelRequest{
		System: withSummary(t.system, t.view.summary), Messages: a.requestMessages(t.view, t.in.Turn, w), Tools: t.tools.specs, MaxTokens: a.opts.MaxTokens,
	}
	req.Messages = a.withImages(ctx, t.view, req.Messages, t.in.Turn, a.models[t.slot])
	used := estimateRequest(req)
	if t.lastTokens > 0 {
		used = max(used, t.lastTokens+estimateMessages(t.view.msgs[t.lastLen:]))
	}
	// The budget is asked before anything is spent on this step, the
	// summary of a compaction included; every tool call of the step before
	// has its result by now.
	if err := t.checkBudget(ctx, used); err != nil {
		return req, used, err
	}
	if t.managed && used > int(float64(w)*CompactAt) {
		v, calls, err := a.compact(ctx, t.caller(), used)
		t.res.ModelCalls += calls
		switch {
		case errors.Is(err, errNoCut):
			a.opts.Logger.Warn("context over the compaction threshold with nothing left to compact", "turn", t.in.Turn, "tokens", used, "window", w)
		case err != nil:
			return req, used, err
		default:
			t.view, t.lastTokens = v, 0
			req.System, req.Messages = withSummary(t.system, t.view.summary), a.requestMessages(t.view, t.in.Turn, w)
			req.Messages = a.withImages(ctx, t.view, req.Messages, t.in.Turn, a.models[t.slot])
			if used = estimateRequest(req); used > int(float64(w)*CompactAt) {
				a.opts.Logger.Warn("context still over the compaction threshold after compacting", "turn", t.in.Turn, "tokens", used, "window", w)
			}
		}
	}
	return req, used, nil
}

// generate calls the model with req and reports the context use (emitted,
// and stored when the context is managed).
func (t *turnRun) generate(ctx context.Context, req conch.ModelRequest, used int) (conch.ModelResponse, error) {
	a := t.a
	c := t.caller()
	resp, calls, err := a.generate(ctx, c, req, "", t.emit)
	t.res.ModelCalls += calls
	if err != nil {
		return resp, err
	}
	t.res.Model, t.res.Fallback = c.slot.model.Name(), c.slot.fallback
	use := conch.ContextUse{InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens, Window: c.slot.window}
	if use.InputTokens == 0 {
		use.InputTokens = used
	}
	t.emit(use)
	if t.managed {
		if err := a.opts.Context.RecordContextUse(context.WithoutCancel(ctx), t.key, use); err != nil {
			a.opts.Logger.Error("record context use", "turn", t.in.Turn, "err", err)
		}
	}
	t.lastTokens = resp.Usage.InputTokens + resp.Usage.OutputTokens
	return resp, nil
}

// answer handles a response without tool calls: it stores the answer and
// asks the pre-stop hooks. done is false when their issues were handed
// back and the loop goes on.
func (t *turnRun) answer(ctx context.Context, resp conch.ModelResponse) (done bool, err error) {
	a := t.a
	msg := conch.Message{Role: conch.RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls}
	if resp.Text == "" {
		msg.Text = "(The model returned an empty answer.)"
	}
	if resp.StopReason == conch.StopMaxTokens {
		msg.Text += "\n\n(The answer was cut off at the model's output limit.)"
	}
	if err := a.opts.Store.AppendMessage(ctx, t.in.Turn, msg); err != nil {
		return true, fmt.Errorf("record answer: %w", err)
	}
	if note, ok := a.preStop(ctx, t.in.Turn, t.env, msg.Text, &t.preStops, t.emit); ok {
		if err := a.opts.Store.AppendMessage(ctx, t.in.Turn, note); err != nil {
			return true, fmt.Errorf("record pre-stop issues: %w", err)
		}
		t.add(msg)
		t.lastLen = len(t.view.msgs)
		t.add(note)
		return false, nil
	}
	t.res.Text = msg.Text
	t.res.Attachments = t.files
	return true, nil
}

// toolCalls stores the model's tool calls and runs them in order, applying
// the repeated-call and consecutive-error breakers. done is true when the
// turn ends here (a breaker or an error).
func (t *turnRun) toolCalls(ctx context.Context, resp conch.ModelResponse) (Result, bool, error) {
	a, turn := t.a, t.in.Turn
	msg := conch.Message{Role: conch.RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls}
	if err := a.opts.Store.AppendMessage(ctx, turn, msg); err != nil {
		return t.res, true, fmt.Errorf("record tool calls: %w", err)
	}
	t.add(msg)
	t.lastLen = len(t.view.msgs)

	for i, call := range resp.ToolCalls {
		sig := call.Name + "\x00" + canonicalJSON(call.Arguments)
		if sig == t.lastCall {
			// Answer the remaining calls so the history stays valid.
			a.skipCalls(ctx, turn, resp.ToolCalls[i:], "not run: the same call was just made")
			res, err := a.stop(ctx, turn, t.res, StopRepeatedCall,
				fmt.Sprintf("I stopped because I was about to repeat the same `%s` call twice in a row, which means I was stuck. Tell me how you would like to proceed.", call.Name), t.files...)
			return res, true, err
		}
		t.lastCall = sig
		out, err := a.runTool(ctx, turn, t.tools, t.env, call, t.emit)
		if errors.Is(err, conch.ErrAwaitingAnswer) {
			// Shut down while waiting for a person: the call keeps no
			// result, so the resumed turn runs it again (resume.go).
			a.skipCalls(ctx, turn, resp.ToolCalls[i+1:], "not run: the turn ended with an error")
			return t.res, true, err
		}
		if err != nil {
			a.skipCalls(ctx, turn, resp.ToolCalls[i:], "not run: the turn ended with an error")
			return t.res, true, err
		}
		tm := conch.Message{Role: conch.RoleTool, ToolResult: &conch.ToolResult{
			CallID: call.ID, Name: call.Name, Content: out.Content, IsError: out.IsError, Images: out.Images,
		}}
		if !out.IsError {
			tm.ToolResult.Attachments = out.Attachments
		}
		a.keepToolImages(ctx, t.key, tm.ToolResult)
		if err := a.opts.Store.AppendMessage(ctx, turn, tm); err != nil {
			return t.res, true, fmt.Errorf("record tool result: %w", err)
		}
		t.add(tm)
		t.files = append(t.files, tm.ToolResult.Attachments...)
		if out.IsError {
			t.toolErrors++
		} else {
			t.toolErrors = 0
		}
		if t.toolErrors >= a.opts.MaxToolErrors {
			a.skipCalls(ctx, turn, resp.ToolCalls[i+1:], "not run: too many tool errors in a row")
			res, err := a.stop(ctx, turn, t.res, StopToolErrors,
				fmt.Sprintf("I stopped after %d tool errors in a row. The last one (`%s`) said:\n\n%s", t.toolErrors, call.Name, clip(out.Content, 500)), t.files...)
			return res, true, err
		}
	}
	return t.res, false, nil
}

// turnFiles returns the files queued for the answer by the turn's stored
// tool results, in order.
func (v contextView) turnFiles(turn conch.TurnID) []conch.Attachment {
	var files []conch.Attachment
	for i, m := range v.msgs {
		if i < len(v.pos) && v.pos[i].Turn == turn && m.ToolResult != nil && !m.ToolResult.IsError {
			files = append(files, m.ToolResult.Attachments...)
		}
	}
	return files
}
