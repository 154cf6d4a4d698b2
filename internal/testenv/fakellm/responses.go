package fakellm

import (
	"encoding/json"
	"fmt"
	"strings"
)

// OpenAI Responses API wire format (POST /v1/responses), what Codex speaks.
//
// Input items become Messages: a "message" item (typed or the short
// {"role","content"} form) is a message of its role, system and developer
// messages and the "instructions" field are the System prompt; function_call
// and custom_tool_call items are ToolCalls of an assistant message (joined to
// the assistant message just before them, as one answer's output items);
// function_call_output and custom_tool_call_output items are "tool" messages
// with one ToolResult each; reasoning items are skipped. Tools are those of
// the "tools" field and of "additional_tools" input items (Codex 0.169
// declares its tools there), with namespaces flattened. A custom
// (freeform) tool call's input is recorded as the Args {"input": "<text>"},
// the shape of the function form of the same tool (Codex's apply_patch).
//
// The answer is a Response object: a message output item holding one
// output_text part, then a function_call item per call, or a
// custom_tool_call item when the request offered the call's tool as a
// "custom" tool (its input is then the call's "input" argument when that is
// a string, else the arguments' JSON). MaxTokens gives status "incomplete"
// with incomplete_details.reason "max_output_tokens".

type rspContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// rspTool is a tool declaration: a function, a custom (freeform) tool, a
// namespace holding others, or a built-in (web_search, …).
type rspTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Format      json.RawMessage `json:"format"`
	Tools       []rspTool       `json:"tools"`
}

type rspItem struct {
	Type      string          `json:"type"`
	Tools     []rspTool       `json:"tools"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Input     string          `json:"input"`
	Output    json.RawMessage `json:"output"`
}

type rspRequest struct {
	Model           string          `json:"model"`
	Instructions    string          `json:"instructions"`
	Input           json.RawMessage `json:"input"`
	MaxOutputTokens int             `json:"max_output_tokens"`
	Stream          bool            `json:"stream"`
	Tools           []rspTool       `json:"tools"`
	Text            struct {
		Format struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"text"`
}

// addTools records tools, those inside namespaces by their own names.
func (r *Request) addTools(tools []rspTool) {
	for _, t := range tools {
		if t.Type == "namespace" {
			r.addTools(t.Tools)
			continue
		}
		params := t.Parameters
		if t.Type == "custom" {
			params = t.Format
		}
		r.Tools = append(r.Tools, Tool{Type: t.Type, Name: t.Name, Description: t.Description, Parameters: params})
	}
}

// rspText reads content that is a string, null, or an array of parts whose
// text parts (input_text, output_text, text) count.
func rspText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var parts []rspContent
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("content is neither a string nor an array of parts: %w", err)
	}
	var texts []string
	for _, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			texts = append(texts, p.Text)
		}
	}
	return joinText(texts), nil
}

func decodeResponses(body []byte, req *Request) (stream bool, err error) {
	var in rspRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return false, err
	}
	req.Model, req.MaxTokens, req.Stream = in.Model, in.MaxOutputTokens, in.Stream
	req.JSONSchema = jsonFormat(in.Text.Format.Type, in.Text.Format.Schema)
	var system []string
	if in.Instructions != "" {
		system = append(system, in.Instructions)
	}
	var items []rspItem
	switch {
	case len(in.Input) == 0 || string(in.Input) == "null":
	case in.Input[0] == '"':
		var s string
		if err := json.Unmarshal(in.Input, &s); err != nil {
			return false, fmt.Errorf("input: %w", err)
		}
		items = []rspItem{{Type: "message", Role: "user", Content: in.Input}}
	default:
		if err := json.Unmarshal(in.Input, &items); err != nil {
			return false, fmt.Errorf("input is neither a string nor an array of items: %w", err)
		}
	}
	// call adds a tool call to the assistant message just before it, or
	// starts one.
	call := func(c Call) {
		if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == "assistant" {
			req.Messages[n-1].ToolCalls = append(req.Messages[n-1].ToolCalls, c)
			return
		}
		req.Messages = append(req.Messages, Message{Role: "assistant", ToolCalls: []Call{c}})
	}
	for i, it := range items {
		switch it.Type {
		case "message", "":
			text, err := rspText(it.Content)
			if err != nil {
				return false, fmt.Errorf("input[%d]: %w", i, err)
			}
			switch it.Role {
			case "system", "developer":
				system = append(system, text)
			case "user", "assistant":
				req.Messages = append(req.Messages, Message{Role: it.Role, Text: text})
			default:
				return false, fmt.Errorf("input[%d]: unknown role %q", i, it.Role)
			}
		case "additional_tools":
			// Codex 0.169 declares its tools in an input item
			// (role developer) instead of the tools field.
			req.addTools(it.Tools)
		case "function_call":
			call(Call{ID: it.CallID, Name: it.Name, Args: json.RawMessage(it.Arguments)})
		case "custom_tool_call":
			args, _ := json.Marshal(map[string]string{"input": it.Input})
			call(Call{ID: it.CallID, Name: it.Name, Args: args})
		case "function_call_output", "custom_tool_call_output":
			text, err := rspText(it.Output)
			if err != nil {
				return false, fmt.Errorf("input[%d].output: %w", i, err)
			}
			req.Messages = append(req.Messages, Message{Role: "tool", ToolResults: []ToolResult{{CallID: it.CallID, Content: text}}})
		}
		// reasoning, web_search_call, local_shell_call … carry nothing the
		// neutral model holds.
	}
	req.System = strings.Join(system, "\n\n")
	req.addTools(in.Tools)
	return in.Stream, nil
}

type rspOutContent struct {
	Type        string `json:"type"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
	Text        string `json:"text"`
}

// rspOutItem is an output item: a message, a function_call or a
// custom_tool_call (the fields of the others are left out).
type rspOutItem struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Status    string          `json:"status"`
	Role      string          `json:"role,omitempty"`
	Content   []rspOutContent `json:"content,omitempty"`
	CallID    string          `json:"call_id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments *string         `json:"arguments,omitempty"`
	Input     *string         `json:"input,omitempty"`
}

// payload is the item's streamed text: its message text, arguments or
// custom input.
func (it rspOutItem) payload() string {
	switch {
	case it.Arguments != nil:
		return *it.Arguments
	case it.Input != nil:
		return *it.Input
	case len(it.Content) > 0:
		return it.Content[0].Text
	}
	return ""
}

// pending is the item as output_item.added shows it: in progress, without
// its text.
func (it rspOutItem) pending() rspOutItem {
	it.Status = "in_progress"
	empty := ""
	switch {
	case it.Arguments != nil:
		it.Arguments = &empty
	case it.Input != nil:
		it.Input = &empty
	default:
		it.Content = []rspOutContent{}
	}
	return it
}

type rspUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

type rspResponse struct {
	ID                 string         `json:"id"`
	Object             string         `json:"object"`
	CreatedAt          int64          `json:"created_at"`
	Status             string         `json:"status"`
	Background         bool           `json:"background"`
	Error              any            `json:"error"`
	IncompleteDetails  any            `json:"incomplete_details"`
	Instructions       any            `json:"instructions"`
	MaxOutputTokens    any            `json:"max_output_tokens"`
	Model              string         `json:"model"`
	Output             []rspOutItem   `json:"output"`
	ParallelToolCalls  bool           `json:"parallel_tool_calls"`
	PreviousResponseID any            `json:"previous_response_id"`
	Reasoning          map[string]any `json:"reasoning"`
	ServiceTier        string         `json:"service_tier"`
	Store              bool           `json:"store"`
	Temperature        float64        `json:"temperature"`
	Text               map[string]any `json:"text"`
	ToolChoice         string         `json:"tool_choice"`
	Tools              []any          `json:"tools"`
	TopP               float64        `json:"top_p"`
	Truncation         string         `json:"truncation"`
	Usage              *rspUsage      `json:"usage"`
	User               any            `json:"user"`
	Metadata           map[string]any `json:"metadata"`
}

// customTool reports whether the request offered name as a custom
// (freeform) tool.
func (r *Request) customTool(name string) bool {
	for _, t := range r.Tools {
		if t.Name == name && t.Type == "custom" {
			return true
		}
	}
	return false
}

// customInput is what a custom tool call sends for args: its "input"
// string, else the arguments' JSON.
func customInput(args json.RawMessage) string {
	var obj struct {
		Input *string `json:"input"`
	}
	if json.Unmarshal(args, &obj) == nil && obj.Input != nil {
		return *obj.Input
	}
	return string(args)
}

func responsesResponse(req *Request, r Reply, id uint64) *rspResponse {
	out := &rspResponse{
		ID:                fmt.Sprintf("resp_fake%d", id),
		Object:            "response",
		CreatedAt:         fakeCreated,
		Status:            "completed",
		Model:             req.Model,
		Output:            []rspOutItem{},
		ParallelToolCalls: true,
		Reasoning:         map[string]any{"effort": nil, "summary": nil},
		ServiceTier:       "default",
		Text:              map[string]any{"format": map[string]any{"type": "text"}, "verbosity": "medium"},
		ToolChoice:        "auto",
		Tools:             []any{},
		TopP:              1,
		Temperature:       1,
		Truncation:        "disabled",
		Metadata:          map[string]any{},
	}
	if req.MaxTokens > 0 {
		out.MaxOutputTokens = req.MaxTokens
	}
	if r.text != "" || len(r.calls) == 0 {
		out.Output = append(out.Output, rspOutItem{
			ID: fmt.Sprintf("msg_fake%d", id), Type: "message", Status: "completed", Role: "assistant",
			Content: []rspOutContent{{Type: "output_text", Annotations: []any{}, Logprobs: []any{}, Text: r.text}},
		})
	}
	for i, c := range r.calls {
		callID := c.ID
		if callID == "" {
			callID = fmt.Sprintf("call_fake%d_%d", id, i)
		}
		it := rspOutItem{Type: "function_call", Status: "completed", CallID: callID, Name: c.Name}
		if req.customTool(c.Name) {
			in := customInput(c.Args)
			it.ID, it.Type, it.Input = fmt.Sprintf("ctc_fake%d_%d", id, i), "custom_tool_call", &in
		} else {
			args := string(c.Args)
			it.ID, it.Arguments = fmt.Sprintf("fc_fake%d_%d", id, i), &args
		}
		out.Output = append(out.Output, it)
	}
	if r.maxTokens {
		out.Status = "incomplete"
		out.IncompleteDetails = map[string]any{"reason": "max_output_tokens"}
	}
	in, o := r.usageFor(req.Body)
	out.Usage = &rspUsage{InputTokens: in, OutputTokens: o, TotalTokens: in + o}
	return out
}

// jsonFormat is the JSONSchema of a response format: the schema for
// json_schema, {} for json_object, nil otherwise.
func jsonFormat(typ string, schema json.RawMessage) json.RawMessage {
	switch typ {
	case "json_schema":
		if len(schema) > 0 && string(schema) != "null" {
			return schema
		}
		return json.RawMessage("{}")
	case "json_object":
		return json.RawMessage("{}")
	}
	return nil
}
