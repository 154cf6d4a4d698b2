package fakellm

import (
	"encoding/json"
	"net/http"
	"strings"
)

// Provider names one of the three wire protocols the server speaks.
type Provider string

// Providers.
const (
	OpenAI    Provider = "openai"    // POST /v1/chat/completions
	Responses Provider = "responses" // POST /v1/responses (OpenAI Responses API)
	Anthropic Provider = "anthropic" // POST /v1/messages
	Gemini    Provider = "gemini"    // POST /v1beta/models/{model}:generateContent
)

// Request is what a client sent, decoded into a provider-neutral form.
type Request struct {
	Provider Provider
	// Path is the URL path, e.g. "/v1beta/models/gemini-2.5-flash:generateContent".
	Path string
	// Model is the model the client asked for.
	Model string
	// APIKey is the credential the client sent: the bearer token (OpenAI,
	// Anthropic SDK v2), Anthropic's x-api-key, Gemini's x-goog-api-key (or
	// ?key=).
	APIKey string
	// Header holds the request headers.
	Header http.Header
	// System is the system prompt (OpenAI system/developer messages joined
	// with a blank line, Responses instructions and system/developer items, Anthropic's system field, Gemini's systemInstruction).
	System string
	// Messages is the conversation in wire order. Roles are the wire roles,
	// except that Gemini's "model" is reported as "assistant".
	Messages []Message
	// Tools are the tool schemas offered to the model.
	Tools []Tool
	// MaxTokens is the output token limit asked for, 0 when none.
	MaxTokens int
	// JSONSchema is set when the client asked for a JSON answer: the
	// schema it gave ({} when it gave none). Gemini
	// generationConfig.responseMimeType application/json (Gemini CLI's
	// model router asks so before each turn), OpenAI response_format
	// json_schema or json_object, Responses text.format json_schema or
	// json_object. A handler answers such a request with Text(json).
	JSONSchema json.RawMessage
	// Stream is set when the client asked for a streamed answer (OpenAI,
	// Responses and Anthropic "stream": true, Gemini streamGenerateContent).
	Stream bool
	// Body is the raw request body.
	Body []byte

	includeUsage bool // OpenAI stream_options.include_usage
}

// Message is one wire message.
type Message struct {
	// Role is "user", "assistant", (OpenAI and Responses) "tool" or
	// (Anthropic, as Claude Code sends it between the others) "system".
	Role string
	// Text joins the message's text parts with newlines.
	Text string
	// ToolCalls are the tool calls of an assistant message.
	ToolCalls []Call
	// ToolResults are the tool results the message carries: one for an
	// OpenAI "tool" message, any number for an Anthropic or Gemini user
	// message.
	ToolResults []ToolResult
	// Images are the pictures of a user message, decoded and checked as
	// the API checks them (OpenAI image_url data URLs, Anthropic image
	// blocks, Gemini inlineData parts).
	Images []Image
	// Audio are the recordings of a user message (Gemini inlineData).
	Audio []Audio
}

// Call is a tool call, in a Reply or recorded from a request.
type Call struct {
	// ID is the call's id; empty in Gemini calls without one.
	ID   string
	Name string
	// Args is the arguments as a JSON object.
	Args json.RawMessage
	// Signature is Gemini's thoughtSignature on the call's part, base64 as on
	// the wire; empty elsewhere.
	Signature string
}

// ToolResult is a tool result recorded from a request.
type ToolResult struct {
	// CallID is the id of the call answered (OpenAI tool_call_id, Anthropic
	// tool_use_id, Gemini functionResponse.id, empty when Gemini sent none).
	CallID string
	// Name is the tool's name where the wire carries it (Gemini).
	Name string
	// Content is the result text (Gemini: response.output or response.error,
	// else the response object as JSON).
	Content string
	// IsError is set when the client marked the result as a failure
	// (Anthropic is_error, Gemini response.error).
	IsError bool
	// Images are the pictures inside the result (Anthropic only: the
	// other APIs carry none in a tool result).
	Images []Image
}

// Tool is a tool schema offered to the model.
type Tool struct {
	// Type is the Responses API's tool type ("function", "custom", …);
	// empty for the other APIs.
	Type        string
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments (a custom tool's
	// format, e.g. its grammar).
	Parameters json.RawMessage
}

// ToolResults returns every tool result in the request, in order.
func (r Request) ToolResults() []ToolResult {
	var out []ToolResult
	for _, m := range r.Messages {
		out = append(out, m.ToolResults...)
	}
	return out
}

// Images returns every picture in the request, in order: those of
// messages and those inside tool results.
func (r Request) Images() []Image {
	var out []Image
	for _, m := range r.Messages {
		out = append(out, m.Images...)
		for _, t := range m.ToolResults {
			out = append(out, t.Images...)
		}
	}
	return out
}

// LastUserText returns the text of the last message with text from the user.
func (r Request) LastUserText() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if m := r.Messages[i]; m.Role == "user" && m.Text != "" {
			return m.Text
		}
	}
	return ""
}

// Tool returns the named tool schema and whether it was offered.
func (r Request) Tool(name string) (Tool, bool) {
	for _, t := range r.Tools {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

func joinText(parts []string) string { return strings.Join(parts, "\n") }
