// Package openai implements conch.Model over OpenAI Chat Completions with
// the official SDK (github.com/openai/openai-go/v3). It works with any
// server that speaks Chat Completions: OpenAI, Ollama, vLLM, OpenRouter,
// Groq, llama.cpp.
//
// The SDK's own retries are off and OPENAI_* environment variables are
// ignored: the agent loop owns retries, and the config is the only source
// of settings.
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"conch"
	"conch/llm/internal/convert"
	"conch/llm/internal/llmerr"
)

// DefaultBaseURL is the official API.
const DefaultBaseURL = "https://api.openai.com/v1"

// DefaultTimeout bounds one call when Config.Timeout is zero.
const DefaultTimeout = 10 * time.Minute

// Config configures a Model.
type Config struct {
	// BaseURL is the API root including its version path, to which
	// "/chat/completions" is appended: DefaultBaseURL when empty, or e.g.
	// "http://localhost:11434/v1" (Ollama), "http://host:8000/v1" (vLLM),
	// "https://openrouter.ai/api/v1", "https://api.groq.com/openai/v1".
	BaseURL string
	// APIKey is sent as a bearer token. Required for the official API;
	// optional with a BaseURL of a server that needs none (Ollama, vLLM).
	APIKey string
	// Model is the model id, e.g. "gpt-4.1" or "qwen3:8b". Required.
	Model string
	// Timeout bounds one call; DefaultTimeout when zero.
	Timeout time.Duration
	// HTTPClient sends the requests; a client with its own transport when nil.
	HTTPClient *http.Client
	// MaxTokens is the output limit for requests that set none; 0 leaves it
	// to the server.
	MaxTokens int
}

// Model is an OpenAI-compatible chat model. It is safe for concurrent use.
type Model struct {
	model     string
	timeout   time.Duration
	maxTokens int
	// official is set for api.openai.com, which wants max_completion_tokens;
	// compatible servers all understand max_tokens.
	official bool
	svc      oai.ChatCompletionService
}

var (
	_ conch.Model          = (*Model)(nil)
	_ conch.StreamingModel = (*Model)(nil)
)

// New returns a Model for cfg.
func New(cfg Config) (*Model, error) {
	if cfg.Model == "" {
		return nil, errors.New("openai: config: Model is required (e.g. \"gpt-4.1\")")
	}
	base := strings.TrimSpace(cfg.BaseURL)
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openai: config: BaseURL %q is not an http(s) URL (e.g. %q)", cfg.BaseURL, DefaultBaseURL)
	}
	official := u.Hostname() == "api.openai.com"
	if official && cfg.APIKey == "" {
		return nil, errors.New("openai: config: APIKey is required for api.openai.com")
	}
	if cfg.Timeout < 0 || cfg.MaxTokens < 0 {
		return nil, errors.New("openai: config: Timeout and MaxTokens must not be negative")
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	opts := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	return &Model{
		model:     cfg.Model,
		timeout:   timeout,
		maxTokens: cfg.MaxTokens,
		official:  official,
		// The service, not oai.NewClient: NewClient adds options from
		// OPENAI_BASE_URL, OPENAI_ORG_ID, OPENAI_CUSTOM_HEADERS, ….
		svc: oai.NewChatCompletionService(opts...),
	}, nil
}

// Name returns "openai/<model>".
func (m *Model) Name() string { return "openai/" + m.model }

// Generate runs one chat completion.
func (m *Model) Generate(ctx context.Context, req conch.ModelRequest) (conch.ModelResponse, error) {
	const op = "openai generate"
	params, err := m.params(req)
	if err != nil {
		return conch.ModelResponse{}, fmt.Errorf("%s: %w", op, err)
	}
	callCtx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	start := time.Now()
	var httpResp *http.Response
	out, err := m.svc.New(callCtx, params, option.WithResponseInto(&httpResp))
	if err != nil {
		return conch.ModelResponse{}, m.fail(ctx, op, err, httpResp)
	}
	resp, err := m.response(out)
	if err != nil {
		return conch.ModelResponse{}, fmt.Errorf("%s: %w", op, err)
	}
	resp.Duration = time.Since(start)
	return resp, nil
}

func (m *Model) params(req conch.ModelRequest) (oai.ChatCompletionNewParams, error) {
	p := oai.ChatCompletionNewParams{Model: shared.ChatModel(m.model)}
	if req.System != "" {
		p.Messages = append(p.Messages, oai.SystemMessage(req.System))
	}
	// Chat Completions' tool messages carry text only: the pictures of a
	// run of tool results follow it as one user message.
	var toolImages []oai.ChatCompletionContentPartUnionParam
	flush := func() {
		if len(toolImages) > 0 {
			p.Messages = append(p.Messages, oai.UserMessage(toolImages))
			toolImages = nil
		}
	}
	for i, msg := range req.Messages {
		if msg.Role != conch.RoleTool {
			flush()
		}
		switch msg.Role {
		case conch.RoleUser:
			if len(msg.Images) == 0 {
				p.Messages = append(p.Messages, oai.UserMessage(msg.Text))
				break
			}
			if err := convert.CheckImages(fmt.Sprintf("message %d", i), msg.Images); err != nil {
				return p, err
			}
			var parts []oai.ChatCompletionContentPartUnionParam
			if msg.Text != "" {
				parts = append(parts, oai.TextContentPart(msg.Text))
			}
			for _, im := range msg.Images {
				parts = append(parts, oai.ImageContentPart(oai.ChatCompletionContentPartImageImageURLParam{URL: convert.DataURL(im)}))
			}
			p.Messages = append(p.Messages, oai.UserMessage(parts))
		case conch.RoleAssistant:
			var a oai.ChatCompletionAssistantMessageParam
			if msg.Text != "" || len(msg.ToolCalls) == 0 {
				a.Content.OfString = oai.String(msg.Text)
			}
			for _, c := range msg.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, oai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &oai.ChatCompletionMessageFunctionToolCallParam{
						ID: convert.WireID(c.ID),
						Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{
							Name:      c.Name,
							Arguments: convert.ArgsString(c.Arguments),
						},
					},
				})
			}
			p.Messages = append(p.Messages, oai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case conch.RoleTool:
			r := msg.ToolResult
			if r == nil {
				return p, convert.BadRequest(fmt.Sprintf("message %d: a tool message without a ToolResult", i), nil)
			}
			content := r.Content
			if r.IsError {
				// Chat Completions has no error flag on tool results.
				content = "Error: " + content
			}
			p.Messages = append(p.Messages, oai.ToolMessage(content, convert.WireID(r.CallID)))
			if len(r.Images) > 0 {
				if err := convert.CheckImages(fmt.Sprintf("message %d", i), r.Images); err != nil {
					return p, err
				}
				toolImages = append(toolImages, oai.TextContentPart(convert.ToolImagesNote(r)))
				for _, im := range r.Images {
					toolImages = append(toolImages, oai.ImageContentPart(oai.ChatCompletionContentPartImageImageURLParam{URL: convert.DataURL(im)}))
				}
			}
		default:
			return p, convert.BadRequest(fmt.Sprintf("message %d: unknown role %q", i, msg.Role), nil)
		}
	}
	flush()
	for _, t := range req.Tools {
		schema, err := convert.Schema(t)
		if err != nil {
			return p, err
		}
		fd := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(schema)}
		if t.Description != "" {
			fd.Description = oai.String(t.Description)
		}
		p.Tools = append(p.Tools, oai.ChatCompletionFunctionTool(fd))
	}
	if n := firstPositive(req.MaxTokens, m.maxTokens); n > 0 {
		if m.official {
			p.MaxCompletionTokens = oai.Int(int64(n))
		} else {
			p.MaxTokens = oai.Int(int64(n))
		}
	}
	return p, nil
}

// firstPositive returns the first positive value, 0 when none is.
func firstPositive(a, b int) int {
	if a > 0 {
		return a
	}
	return max(b, 0)
}

func (m *Model) response(out *oai.ChatCompletion) (conch.ModelResponse, error) {
	if len(out.Choices) == 0 {
		return conch.ModelResponse{}, emptyChoices(out.RawJSON())
	}
	ch := out.Choices[0]
	resp := conch.ModelResponse{
		Text:  ch.Message.Content,
		Model: out.Model,
		Usage: conch.Usage{
			InputTokens:  int(out.Usage.PromptTokens),
			CachedTokens: int(out.Usage.PromptTokensDetails.CachedTokens),
			OutputTokens: int(out.Usage.CompletionTokens),
		},
	}
	if resp.Model == "" {
		resp.Model = m.model
	}
	if resp.Text == "" && ch.Message.Refusal != "" {
		resp.Text = ch.Message.Refusal
	}
	for _, tc := range ch.Message.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			continue // custom (free-text) tools are never offered
		}
		id := tc.ID
		if id == "" {
			id = convert.NewID("call_") // some compatible servers send none
		}
		resp.ToolCalls = append(resp.ToolCalls, conch.ToolCall{
			ID: id, Name: tc.Function.Name, Arguments: convert.ArgsFromString(tc.Function.Arguments),
		})
	}
	switch ch.FinishReason {
	case "stop":
		resp.StopReason = conch.StopEnd
	case "tool_calls", "function_call":
		resp.StopReason = conch.StopToolUse
	case "length":
		resp.StopReason = conch.StopMaxTokens
	default:
		resp.StopReason = conch.StopOther
	}
	if len(resp.ToolCalls) > 0 && resp.StopReason != conch.StopMaxTokens {
		// Some compatible servers (older Ollama) say "stop" with tool calls.
		resp.StopReason = conch.StopToolUse
	}
	return resp, nil
}

// emptyChoices explains an answer without choices. OpenRouter sends
// upstream failures as a 200 whose body is {"error": {"code": 502, …}}.
func emptyChoices(raw string) error {
	var body struct {
		Error *struct {
			Code    json.RawMessage `json:"code"`
			Message string          `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(raw), &body); err == nil && body.Error != nil {
		var status int
		var code string
		if json.Unmarshal(body.Error.Code, &status) != nil {
			_ = json.Unmarshal(body.Error.Code, &code)
		}
		if status < 400 || status > 599 {
			status = http.StatusBadGateway
		}
		me := llmerr.HTTP(status, nil, code, body.Error.Message, errors.New("error in a 200 answer"))
		return me
	}
	return &conch.ModelError{Kind: conch.KindTransient, Message: "the answer has no choices", Err: errors.New("no choices in the answer")}
}

func (m *Model) fail(ctx context.Context, op string, err error, httpResp *http.Response) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", op, ctx.Err())
	}
	var apiErr *oai.Error
	if errors.As(err, &apiErr) {
		msg := apiErr.Message
		if msg == "" {
			msg = strings.TrimSpace(apiErr.RawJSON())
		}
		var h http.Header
		if apiErr.Response != nil {
			h = apiErr.Response.Header
			if msg == "" {
				// Not the OpenAI error shape: the SDK left the body for us.
				msg = readBody(apiErr.Response)
			}
		}
		return fmt.Errorf("%s: %w", op, llmerr.HTTP(apiErr.StatusCode, h, apiErr.Code, msg, err))
	}
	if httpResp != nil && httpResp.StatusCode >= 400 {
		// An error body the SDK could not decode (a proxy's HTML page, a
		// compatible server's own format): the SDK returns its decoding
		// error, the status is still here.
		return fmt.Errorf("%s: %w", op, llmerr.HTTP(httpResp.StatusCode, httpResp.Header, "", readBody(httpResp), err))
	}
	return fmt.Errorf("%s: %w", op, llmerr.Transport(ctx, m.timeout, err))
}

// readBody returns the start of an error answer's body, or its status text.
func readBody(resp *http.Response) string {
	var body []byte
	if resp.Body != nil {
		body, _ = io.ReadAll(io.LimitReader(resp.Body, 4096))
	}
	if msg := strings.TrimSpace(string(body)); msg != "" {
		return msg
	}
	return http.StatusText(resp.StatusCode)
}
