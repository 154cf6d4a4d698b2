package agent

import (
	"context"
	"fmt"

	"conch"
)

// TurnApprovals reads a turn's questions to people by tool call id
// (conch.ApprovalStore has it).
type TurnApprovals interface {
	TurnApprovals(ctx context.Context, turn conch.TurnID) (map[string]conch.Approval, error)
}

// resumeWaiting goes on where a resumed turn waited: a tool call that was
// waiting for a person's answer when conch stopped had not run (it runs
// only once allowed), so instead of the synthetic "interrupted" result it is
// run again, and finds its question (still open, or answered meanwhile).
// Only calls that had not taken their decision qualify (Approval.Used is
// zero: still open, or answered while conch was down or starting): one
// that took an allowing answer may have started before the crash, and
// keeps the "interrupted" result like any other call left without one.
func (t *turnRun) resumeWaiting(ctx context.Context) error {
	a := t.a
	if a.opts.Approvals == nil || t.env.Approvals == nil {
		return nil
	}
	msgs, pos := t.view.msgs, t.view.pos
	i := len(msgs) - 1
	for i >= 0 && msgs[i].Role == conch.RoleTool {
		i--
	}
	if i < 0 || msgs[i].Role != conch.RoleAssistant || len(msgs[i].ToolCalls) == 0 || pos[i].Turn != t.in.Turn {
		return nil
	}
	var waiting []int
	for j := i + 1; j < len(msgs); j++ {
		if r := msgs[j].ToolResult; r != nil && r.IsError && r.Content == interruptedResult {
			waiting = append(waiting, j)
		}
	}
	if len(waiting) == 0 {
		return nil
	}
	asked, err := a.opts.Approvals.TurnApprovals(ctx, t.in.Turn)
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	for _, j := range waiting {
		id := msgs[j].ToolResult.CallID
		ap, ok := asked[id]
		if !ok || !ap.Request.Resumable || !ap.Used.IsZero() {
			continue
		}
		var call conch.ToolCall
		for _, c := range msgs[i].ToolCalls {
			if c.ID == id {
				call = c
			}
		}
		a.opts.Logger.Info("resuming a tool call that waited for an answer", "turn", t.in.Turn, "call", id, "approval", ap.ID)
		out, err := a.runTool(ctx, t.in.Turn, t.tools, t.env, call, t.emit)
		if err != nil {
			return err
		}
		tm := conch.Message{Role: conch.RoleTool, ToolResult: &conch.ToolResult{
			CallID: call.ID, Name: call.Name, Content: out.Content, IsError: out.IsError, Images: out.Images,
		}}
		if !out.IsError {
			tm.ToolResult.Attachments = out.Attachments
		}
		a.keepToolImages(ctx, t.key, tm.ToolResult)
		if err := a.opts.Store.AppendMessage(ctx, t.in.Turn, tm); err != nil {
			return fmt.Errorf("record tool result: %w", err)
		}
		t.view.msgs[j] = tm
	}
	return nil
}
