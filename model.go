package conch

import (
	"context"
	"encoding/json"
	"time"
)

// Role is the author of a message in a model conversation.
type Role string

// Roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one entry of a conversation's history as the model sees it.
type Message struct {
	Role Role
	Text string
	// ToolCalls are the calls an assistant message asks for.
	ToolCalls []ToolCall
	// ToolResult is set on RoleTool messages.
	ToolResult *ToolResult
	// Note marks a RoleUser message conch itself wrote into a turn (the
	// open issues of a pre-stop hook), not the person's message: the model
	// reads it as the user's, while transcripts and read models tell it apart.
	Note bool
	// Images are pictures the model looks at with this message (a photo the
	// person sent). Providers send them as image parts; a model without
	// vision gets a note instead.
	Images []Image
}

// Image is a picture in the model's view: already decoded, scaled and
// stripped of metadata by whoever made it, so a provider only encodes it.
type Image struct {
	// MediaType is image/png, image/jpeg, image/gif or image/webp.
	MediaType string
	Data      []byte
	// Name says where it came from ("inbox/photo.jpg"), for notes and logs.
	Name string
	// Ref is where the prepared picture is kept (a conch.AttachmentStore
	// reference) when Data is not loaded: the store keeps only the
	// reference and the agent reads the bytes when it builds a request.
	Ref string `json:",omitempty"`
}

// ToolCall is one tool invocation requested by the model.
type ToolCall struct {
	ID        string
	Name      string
	Arguments json.RawMessage
}

// ToolResult answers one ToolCall.
type ToolResult struct {
	CallID  string
	Name    string
	Content string
	IsError bool
	// Images are pictures the tool returned (view_image, an MCP tool's
	// image content), after Content.
	Images []Image
	// Attachments are the files the tool queued for the turn's answer
	// (send_file); stored with the result, never shown to the model.
	Attachments []Attachment
}

// ToolSpec describes a tool to the model; Parameters is a JSON Schema object.
// Tool schemas are defined once and translated per provider.
type ToolSpec struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// ModelRequest is one call to a model.
type ModelRequest struct {
	System    string
	Messages  []Message
	Tools     []ToolSpec
	MaxTokens int
}

// StopReason says why the model stopped generating.
type StopReason string

// Stop reasons, normalised across providers.
const (
	StopEnd       StopReason = "end"
	StopToolUse   StopReason = "tool_use"
	StopMaxTokens StopReason = "max_tokens"
	StopOther     StopReason = "other"
)

// Usage counts tokens of one call as the provider reported them.
// InputTokens is the whole prompt, cached part included (every provider's
// count is brought to this form); CachedTokens is the part read from the
// provider's prompt cache, billed at its lower rate.
type Usage struct {
	InputTokens  int
	CachedTokens int
	OutputTokens int
	// Estimated marks counts conch estimated because the provider reported
	// none (a compatible server without usage in its stream).
	Estimated bool
}

// Total is input plus output tokens.
func (u Usage) Total() int { return u.InputTokens + u.OutputTokens }

// ModelResponse is the model's answer: text, tool calls, or both.
type ModelResponse struct {
	Text       string
	ToolCalls  []ToolCall
	StopReason StopReason
	Usage      Usage
	Model      string
	Duration   time.Duration
}

// Model is an LLM provider. Implementations must not retry on their own
// (the agent loop owns retries and honours Retry-After) and must report
// failures as *ModelError so they can be classified.
type Model interface {
	Name() string
	Generate(ctx context.Context, req ModelRequest) (ModelResponse, error)
}

// StreamingModel is a Model that can hand out its text as it is generated.
// The agent loop uses it when a provider has it, so people see the answer
// being written; the response it returns is the same as Generate's.
type StreamingModel interface {
	Model
	// GenerateStream calls onText with each piece of text as it arrives
	// (never concurrently), then returns the whole response. A failure is a
	// *ModelError as for Generate; text already handed out may be partial.
	GenerateStream(ctx context.Context, req ModelRequest, onText func(delta string)) (ModelResponse, error)
}
