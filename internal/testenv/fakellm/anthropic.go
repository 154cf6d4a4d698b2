package fakellm

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Anthropic Messages wire format.

type antBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Source    *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	} `json:"source"`
}

// antImage decodes an image block as the API checks it.
func antImage(b antBlock, where string) (Image, error) {
	if b.Source == nil {
		return Image{}, &mediaError{msg: where + ".source: Field required"}
	}
	if b.Source.Type != "base64" {
		return Image{}, &mediaError{msg: "fakellm: only base64 image sources are served (it fetches nothing)"}
	}
	return decodePicture(Anthropic, where, b.Source.MediaType, b.Source.Data)
}

type antRequest struct {
	Model     string          `json:"model"`
	MaxTokens int             `json:"max_tokens"`
	System    json.RawMessage `json:"system"`
	Messages  []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
	Stream bool `json:"stream"`
}

// antBlocks reads content that is a string or an array of blocks.
func antBlocks(raw json.RawMessage) ([]antBlock, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return []antBlock{{Type: "text", Text: s}}, nil
	}
	var blocks []antBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, fmt.Errorf("content is neither a string nor an array of blocks: %w", err)
	}
	return blocks, nil
}

func antText(blocks []antBlock) string {
	var texts []string
	for _, b := range blocks {
		if b.Type == "text" {
			texts = append(texts, b.Text)
		}
	}
	return joinText(texts)
}

func decodeAnthropic(body []byte, req *Request) (stream bool, err error) {
	var in antRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return false, err
	}
	req.Model, req.MaxTokens, req.Stream = in.Model, in.MaxTokens, in.Stream
	sys, err := antBlocks(in.System)
	if err != nil {
		return false, fmt.Errorf("system: %w", err)
	}
	req.System = antText(sys)
	for i, m := range in.Messages {
		// Claude Code 2.1 sends "system" messages between the others
		// (environment notes); the API takes them.
		if m.Role != "user" && m.Role != "assistant" && m.Role != "system" {
			return false, fmt.Errorf("messages[%d]: unknown role %q", i, m.Role)
		}
		blocks, err := antBlocks(m.Content)
		if err != nil {
			return false, fmt.Errorf("messages[%d]: %w", i, err)
		}
		msg := Message{Role: m.Role, Text: antText(blocks)}
		for j, b := range blocks {
			switch b.Type {
			case "tool_use":
				msg.ToolCalls = append(msg.ToolCalls, Call{ID: b.ID, Name: b.Name, Args: b.Input})
			case "image":
				if m.Role != "user" {
					return false, &mediaError{msg: fmt.Sprintf("messages.%d.content.%d: image blocks are only allowed in user messages", i, j)}
				}
				im, err := antImage(b, fmt.Sprintf("messages.%d.content.%d.image", i, j))
				if err != nil {
					return false, err
				}
				msg.Images = append(msg.Images, im)
			case "tool_result":
				inner, err := antBlocks(b.Content)
				if err != nil {
					return false, fmt.Errorf("messages[%d].content[%d]: %w", i, j, err)
				}
				res := ToolResult{CallID: b.ToolUseID, Content: antText(inner), IsError: b.IsError}
				for k, ib := range inner {
					if ib.Type != "image" {
						continue
					}
					im, err := antImage(ib, fmt.Sprintf("messages.%d.content.%d.tool_result.content.%d.image", i, j, k))
					if err != nil {
						return false, err
					}
					res.Images = append(res.Images, im)
				}
				msg.ToolResults = append(msg.ToolResults, res)
			}
		}
		req.Messages = append(req.Messages, msg)
	}
	for _, t := range in.Tools {
		req.Tools = append(req.Tools, Tool{Name: t.Name, Description: t.Description, Parameters: t.InputSchema})
	}
	return in.Stream, nil
}

type antOutBlock struct {
	Type  string          `json:"type"`
	Text  *string         `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

type antResponse struct {
	ID           string        `json:"id"`
	Type         string        `json:"type"`
	Role         string        `json:"role"`
	Model        string        `json:"model"`
	Content      []antOutBlock `json:"content"`
	StopReason   string        `json:"stop_reason"`
	StopSequence *string       `json:"stop_sequence"`
	Usage        struct {
		InputTokens              int    `json:"input_tokens"`
		OutputTokens             int    `json:"output_tokens"`
		CacheCreationInputTokens int    `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int    `json:"cache_read_input_tokens"`
		ServiceTier              string `json:"service_tier"`
	} `json:"usage"`
}

func anthropicResponse(req *Request, r Reply, id uint64) *antResponse {
	out := &antResponse{
		ID:         fmt.Sprintf("msg_fake%d", id),
		Type:       "message",
		Role:       "assistant",
		Model:      req.Model,
		Content:    []antOutBlock{},
		StopReason: "end_turn",
	}
	if r.text != "" {
		text := r.text
		out.Content = append(out.Content, antOutBlock{Type: "text", Text: &text})
	}
	for i, c := range r.calls {
		b := antOutBlock{Type: "tool_use", ID: c.ID, Name: c.Name, Input: c.Args}
		if b.ID == "" {
			b.ID = fmt.Sprintf("toolu_fake%d_%d", id, i)
		}
		out.Content = append(out.Content, b)
		out.StopReason = "tool_use"
	}
	if r.maxTokens {
		out.StopReason = "max_tokens"
	}
	out.Usage.InputTokens, out.Usage.OutputTokens = r.usageFor(req.Body)
	// input_tokens counts only what was not read from the cache.
	out.Usage.InputTokens -= r.cached
	out.Usage.CacheReadInputTokens = r.cached
	out.Usage.ServiceTier = "standard"
	return out
}

func anthropicError(r Reply, id uint64) map[string]any {
	msg, typ := r.errMsg, "invalid_request_error"
	switch {
	case r.tooLong:
		msg = "prompt is too long: 208732 tokens > 200000 maximum"
	case r.status == http.StatusUnauthorized:
		typ = "authentication_error"
	case r.status == http.StatusForbidden:
		typ = "permission_error"
	case r.status == http.StatusNotFound:
		typ = "not_found_error"
	case r.status == http.StatusRequestEntityTooLarge:
		typ = "request_too_large"
	case r.status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case r.status == 529:
		typ = "overloaded_error"
	case r.status == http.StatusGatewayTimeout:
		typ = "timeout_error"
	case r.status >= 500:
		typ = "api_error"
	}
	if r.errCode != "" {
		typ = r.errCode
	}
	return map[string]any{
		"type":       "error",
		"error":      map[string]any{"type": typ, "message": msg},
		"request_id": fmt.Sprintf("req_fake%d", id),
	}
}
