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
