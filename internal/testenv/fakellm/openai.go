package fakellm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// OpenAI Chat Completions wire format.

type oaiRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		ToolCalls []struct {
			ID       string `json:"id"`
			Type     string `json:"type"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
		ToolCallID string `json:"tool_call_id"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	ResponseFormat struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
	MaxTokens           int  `json:"max_tokens"`
	MaxCompletionTokens int  `json:"max_completion_tokens"`
	Stream              bool `json:"stream"`
	StreamOptions       struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// oaiContent reads content that is a string, null, or an array of parts:
// the text parts joined, and the image_url parts decoded and checked as
// the API does (where names the message in errors).
func oaiContent(raw json.RawMessage, where string) (string, []Image, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil, nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, nil, err
	}
	var parts []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL *struct {
			URL    string `json:"url"`
			Detail string `json:"detail"`
		} `json:"image_url"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", nil, fmt.Errorf("content is neither a string nor an array of parts: %w", err)
	}
	var texts []string
	var images []Image
	for _, p := range parts {
		switch p.Type {
		case "text":
			texts = append(texts, p.Text)
		case "image_url":
			if where == "" {
				continue
			}
			if p.ImageURL == nil {
				return "", nil, &mediaError{msg: "Missing required parameter: '" + where + ".image_url'.", code: "missing_required_parameter"}
			}
			mt, b64, ok := dataURL(p.ImageURL.URL)
			if !ok {
				return "", nil, &mediaError{msg: "fakellm: only data: image URLs are served (it fetches nothing)", code: "invalid_image_url"}
			}
			im, err := decodePicture(OpenAI, where, mt, b64)
			if err != nil {
				return "", nil, err
			}
			images = append(images, im)
		}
	}
	return joinText(texts), images, nil
}

func decodeOpenAI(body []byte, req *Request) (stream bool, err error) {
	var in oaiRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return false, err
	}
	req.Model = in.Model
	req.MaxTokens = max(in.MaxTokens, in.MaxCompletionTokens)
	req.Stream, req.includeUsage = in.Stream, in.StreamOptions.IncludeUsage
	req.JSONSchema = jsonFormat(in.ResponseFormat.Type, in.ResponseFormat.JSONSchema.Schema)
	var system []string
	for i, m := range in.Messages {
		text, images, err := oaiContent(m.Content, fmt.Sprintf("messages[%d].content", i))
		if err != nil {
			return false, fmt.Errorf("messages[%d]: %w", i, err)
		}
		if len(images) > 0 && m.Role != "user" {
			return false, &mediaError{msg: fmt.Sprintf("Invalid 'messages[%d]'. Image URLs are only allowed for messages with role 'user', but this message with role '%s' contains an image URL.", i, m.Role), code: "invalid_value"}
		}
		switch m.Role {
		case "system", "developer":
			system = append(system, text)
			continue
		case "user", "assistant", "tool":
		default:
			return false, fmt.Errorf("messages[%d]: unknown role %q", i, m.Role)
		}
		msg := Message{Role: m.Role, Text: text, Images: images}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, Call{ID: tc.ID, Name: tc.Function.Name, Args: json.RawMessage(tc.Function.Arguments)})
		}
		if m.Role == "tool" {
			msg.Text = ""
			msg.ToolResults = []ToolResult{{CallID: m.ToolCallID, Content: text}}
		}
		req.Messages = append(req.Messages, msg)
	}
	req.System = strings.Join(system, "\n\n")
	for _, t := range in.Tools {
		req.Tools = append(req.Tools, Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	return in.Stream, nil
}

type oaiToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type oaiMessage struct {
	Role        string        `json:"role"`
	Content     *string       `json:"content"`
	Refusal     *string       `json:"refusal"`
	Annotations []any         `json:"annotations"`
	ToolCalls   []oaiToolCall `json:"tool_calls,omitempty"`
}

type oaiChoice struct {
	Index        int        `json:"index"`
	Message      oaiMessage `json:"message"`
	Logprobs     any        `json:"logprobs"`
	FinishReason string     `json:"finish_reason"`
}

type oaiResponse struct {
	ID      string      `json:"id"`
	Object  string      `json:"object"`
	Created int64       `json:"created"`
	Model   string      `json:"model"`
	Choices []oaiChoice `json:"choices"`
	Usage   struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		TotalTokens         int `json:"total_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
			AudioTokens  int `json:"audio_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokensDetails struct {
			ReasoningTokens          int `json:"reasoning_tokens"`
			AudioTokens              int `json:"audio_tokens"`
			AcceptedPredictionTokens int `json:"accepted_prediction_tokens"`
			RejectedPredictionTokens int `json:"rejected_prediction_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
	ServiceTier       string `json:"service_tier"`
	SystemFingerprint string `json:"system_fingerprint"`
}

// fakeCreated is the fixed "created" timestamp of every answer.
const fakeCreated = 1735689600 // 2025-01-01T00:00:00Z

func openAIResponse(req *Request, r Reply, id uint64) *oaiResponse {
	out := &oaiResponse{
		ID:                fmt.Sprintf("chatcmpl-fake%d", id),
		Object:            "chat.completion",
		Created:           fakeCreated,
		Model:             req.Model,
		ServiceTier:       "default",
		SystemFingerprint: "fp_fakellm",
	}
	msg := oaiMessage{Role: "assistant", Annotations: []any{}}
	if r.text != "" || len(r.calls) == 0 {
		text := r.text
		msg.Content = &text
	}
	finish := "stop"
	for i, c := range r.calls {
		tc := oaiToolCall{ID: c.ID, Type: "function"}
		if tc.ID == "" {
			tc.ID = fmt.Sprintf("call_fake%d_%d", id, i)
		}
		tc.Function.Name = c.Name
		tc.Function.Arguments = string(c.Args)
		msg.ToolCalls = append(msg.ToolCalls, tc)
		finish = "tool_calls"
	}
	if r.maxTokens {
		finish = "length"
	}
	out.Choices = make([]oaiChoice, 1)
	out.Choices[0].Message = msg
	out.Choices[0].FinishReason = finish
	in, o := r.usageFor(req.Body)
	out.Usage.PromptTokens, out.Usage.CompletionTokens, out.Usage.TotalTokens = in, o, in+o
	out.Usage.PromptTokensDetails.CachedTokens = r.cached
	return out
}

func openAIError(r Reply) map[string]any {
	msg, typ, code := r.errMsg, "invalid_request_error", any(nil)
	var param any
	switch {
	case r.tooLong:
		msg = "This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens. Please reduce the length of the messages."
		code, param = "context_length_exceeded", "messages"
	case r.status == http.StatusUnauthorized:
		code = "invalid_api_key"
	case r.status == http.StatusNotFound:
		code = "model_not_found"
	case r.status == http.StatusTooManyRequests:
		typ, code = "requests", "rate_limit_exceeded"
	case r.status >= 500:
		typ = "server_error"
	}
	if r.errCode != "" {
		code = r.errCode
	}
	return map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": param, "code": code}}
}
