package conch

import (
	"context"
	"encoding/json"
)

// Tool is something the model can call.
//
// A failure the model should read (a command exited 2, a file is missing, bad
// arguments) is a ToolOutput with IsError set. A Go error means the machinery
// broke and ends the turn.
type Tool interface {
	Spec() ToolSpec
	Run(ctx context.Context, env ToolEnv, args json.RawMessage) (ToolOutput, error)
}

// ToolOutput is what the model reads back.
type ToolOutput struct {
	Content string
	IsError bool
	// ExitCode is the exit status of the program a tool ran, if it ran one.
	ExitCode *int
	// Attachments are files to send with the turn's answer (send_file),
	// already in the AttachmentStore (Ref set). They are stored with the
	// tool's result, so a turn resumed after a crash still sends them.
	Attachments []Attachment
	// Images are pictures for the model to look at with Content
	// (view_image, an MCP tool's image content), ready to send (PNG, JPEG,
	// GIF or WebP within every provider's limits); the agent puts them in
	// the ToolResult.
	Images []Image
}

// ToolEnv is everything a tool may use, passed explicitly.
type ToolEnv struct {
	Conversation ConversationKey
	User         UserKey
	// Sandboxes gives the conversation's computer; nil when no container
	// runtime is configured.
	Sandboxes SandboxProvider
	// Facts is the per-user memory.
	Facts FactStore
	// Progress reports work in progress to the conversation; never nil
	// when set by the agent loop (a no-op otherwise).
	Progress func(text string)
	// CallID is the model's id of the tool call being run (set by the
	// agent loop): an approval is keyed by it, so the same call asking
	// again after a restart finds its question.
	CallID string
	// Approvals asks the conversation's people (approval.go); nil when
	// nobody can be asked: a tool that needs an answer then refuses.
	Approvals Approver
}

// Sandbox returns the conversation's sandbox, creating it on first use.
func (e ToolEnv) Sandbox(ctx context.Context) (Sandbox, error) {
	if e.Sandboxes == nil {
		return nil, Errorf(KindUnavailable, "no sandbox runtime is configured, so there is no computer to run this on")
	}
	return e.Sandboxes.Sandbox(ctx, e.Conversation)
}

// Report sends a progress line if a reporter is set.
func (e ToolEnv) Report(text string) {
	if e.Progress != nil {
		e.Progress(text)
	}
}

// ToolOK returns a successful output.
func ToolOK(content string) ToolOutput { return ToolOutput{Content: content} }

// ToolFail returns a failed output the model will read.
func ToolFail(content string) ToolOutput { return ToolOutput{Content: content, IsError: true} }
