// Package anthropic implements conch.Model over the Anthropic Messages API
// with the official SDK (github.com/anthropics/anthropic-sdk-go/v2).
//
// The SDK's own retries are off and ANTHROPIC_* environment variables are
// ignored: the agent loop owns retries, and the config is the only source
// of settings.
package anthropic

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	ant "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"conch"
	"conch/llm/internal/convert"
	"conch/llm/internal/llmerr"
)

// DefaultBaseURL is the official API; the SDK appends "v1/messages".
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultTimeout bounds one call when Config.Timeout is zero.
const DefaultTimeout = 10 * time.Minute

// DefaultMaxTokens is the output limit for requests that set none: the
// Messages API requires one.
const DefaultMaxTokens = 8192

// Config configures a Model.
type Config struct {
	// BaseURL is the API root without "/v1"; DefaultBaseURL when empty.
	BaseURL string
	// APIKey is sent as x-api-key. Required.
	APIKey string
	// Model is the model id, e.g. "claude-sonnet-4-5". Required.
	Model string
	// Timeout bounds one call; DefaultTimeout when zero.
	Timeout time.Duration
	// HTTPClient sends the requests; a client with its own transport when nil.
	HTTPClient *http.Client
	// MaxTokens is the output limit for requests that set none;
	// DefaultMaxTokens when zero.
	MaxTokens int
}

// Model is an Anthropic Messages model. It is safe for concurrent use.
type Model struct {
	model     string
	timeout   time.Duration
	maxTokens int
	client    ant.Client
}

var (
	_ conch.Model          = (*Model)(nil)
	_ conch.StreamingModel = (*Model)(nil)
)

// New returns a Model for cfg.
func New(cfg Config) (*Model, error) {
	if cfg.Model == "" {
		return nil, errors.New("anthropic: config: Model is required (e.g. \"claude-sonnet-4-5\")")
	}
	if cfg.APIKey == "" {
		return nil, errors.New("anthropic: config: APIKey is required")
	}
	base := strings.TrimSpace(cfg.BaseURL)
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("anthropic: config: BaseURL %q is not an http(s) URL (e.g. %q)", cfg.BaseURL, DefaultBaseURL)
	}
	if strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/v1") {
		return nil, fmt.Errorf("anthropic: config: BaseURL %q must not end in /v1: the SDK appends v1/messages", cfg.BaseURL)
	}
	if cfg.Timeout < 0 || cfg.MaxTokens < 0 {
		return nil, errors.New("anthropic: config: Timeout and MaxTokens must not be negative")
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	maxTokens := cfg.MaxTokens
	if maxTokens == 0 {
		maxTokens = DefaultMaxTokens
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	client := ant.NewClient(
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(base),
		option.WithAPIKey(cfg.APIKey),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0),
		// An explicit request timeout also stops the SDK from refusing
		// non-streaming calls whose max_tokens it expects to take > 10 min.
		option.WithRequestTimeout(timeout),
	)
	return &Model{model: cfg.Model, timeout: timeout, maxTokens: maxTokens, client: client}, nil
}

// Name returns "anthropic/<model>".
func (m *Model) Name() string { return "anthropic/" + m.model }

// Generate sends one Messages request.
func (m *Model) Generate(ctx context.Context, req conch.ModelRequest) (conch.ModelResponse, error) {
	const op = "anthropic generate"
	params, err := m.params(req)
	if err != nil {
		return conch.ModelResponse{}, fmt.Errorf("%s: %w", op, err)
	}
	callCtx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	start := time.Now()
	var httpResp *http.Response
	out, err := m.client.Messages.New(callCtx, params, option.WithResponseInto(&httpResp))
	if err != nil {
		return conch.ModelResponse{}, m.fail(ctx, op, err, httpResp)
	}
	resp := m.response(out)
	resp.Duration = time.Since(start)
	return resp, nil
}

func (m *Model) params(req conch.ModelRequest) (ant.MessageNewParams, error) {
	p := ant.MessageNewParams{Model: ant.Model(m.model), MaxTokens: int64(m.maxTokens)}
	if req.MaxTokens > 0 {
		p.MaxTokens = int64(req.MaxTokens)
	}
	if req.System != "" {
		p.System = []ant.TextBlockParam{{Text: req.System}}
	}
	// add appends blocks to the conversation, merging them into the last
	// message when it has the same role: the API wants every tool result of
	// a turn in ONE user message, and merging also keeps roles alternating.
	type turn struct {
		user   bool
		blocks []ant.ContentBlockParamUnion
	}
	var turns []turn
	add := func(user bool, blocks ...ant.ContentBlockParamUnion) {
		if len(blocks) == 0 {
			return
		}
		if n := len(turns); n > 0 && turns[n-1].user == user {
			turns[n-1].blocks = append(turns[n-1].blocks, blocks...)
			return
		}
		turns = append(turns, turn{user: user, blocks: blocks})
	}
	for i, msg := range req.Messages {
		switch msg.Role {
		case conch.RoleUser:
			if err := convert.CheckImages(fmt.Sprintf("message %d", i), msg.Images); err != nil {
				return p, err
			}
			for _, im := range msg.Images { // pictures before the text, as Anthropic advises
				add(true, ant.NewImageBlockBase64(im.MediaType, base64.StdEncoding.EncodeToString(im.Data)))
			}
			if msg.Text != "" { // the API refuses empty text blocks
				add(true, ant.NewTextBlock(msg.Text))
			}
		case conch.RoleAssistant:
			var blocks []ant.ContentBlockParamUnion
			if msg.Text != "" {
				blocks = append(blocks, ant.NewTextBlock(msg.Text))
			}
			for _, c := range msg.ToolCalls {
				blocks = append(blocks, ant.NewToolUseBlock(convert.WireID(c.ID), convert.ArgsObject(c.Arguments), c.Name))
			}
			add(false, blocks...)
		case conch.RoleTool:
			r := msg.ToolResult
			if r == nil {
				return p, convert.BadRequest(fmt.Sprintf("message %d: a tool message without a ToolResult", i), nil)
			}
			block := ant.ToolResultBlockParam{ToolUseID: convert.WireID(r.CallID)}
			if r.IsError {
				block.IsError = ant.Bool(true)
			}
			if r.Content != "" { // an empty text block is refused; no content is fine
				block.Content = []ant.ToolResultBlockParamContentUnion{{OfText: &ant.TextBlockParam{Text: r.Content}}}
			}
			if err := convert.CheckImages(fmt.Sprintf("message %d", i), r.Images); err != nil {
				return p, err
			}
			for _, im := range r.Images {
				block.Content = append(block.Content, ant.ToolResultBlockParamContentUnion{OfImage: &ant.ImageBlockParam{
					Source: ant.ImageBlockParamSourceUnion{OfBase64: &ant.Base64ImageSourceParam{
						MediaType: ant.Base64ImageSourceMediaType(im.MediaType), Data: base64.StdEncoding.EncodeToString(im.Data)}},
				}})
			}
			add(true, ant.ContentBlockParamUnion{OfToolResult: &block})
		default:
			return p, convert.BadRequest(fmt.Sprintf("message %d: unknown role %q", i, msg.Role), nil)
		}
	}
	for _, t := range turns {
		if t.user {
			p.Messages = append(p.Messages, ant.NewUserMessage(t.blocks...))
		} else {
			p.Messages = append(p.Messages, ant.NewAssistantMessage(t.blocks...))
		}
	}
	for _, t := range req.Tools {
		schema, err := convert.Schema(t)
		if err != nil {
			return p, err
		}
		in := ant.ToolInputSchemaParam{ExtraFields: map[string]any{}}
		for k, v := range schema {
			switch k {
			case "type":
			case "properties":
				in.Properties = v
			case "required":
				list, ok := v.([]any)
				if !ok {
					return p, convert.BadRequest(fmt.Sprintf("tool %q: \"required\" is not an array", t.Name), nil)
				}
				for _, r := range list {
					s, ok := r.(string)
					if !ok {
						return p, convert.BadRequest(fmt.Sprintf("tool %q: \"required\" holds a non-string", t.Name), nil)
					}
					in.Required = append(in.Required, s)
				}
			default:
				in.ExtraFields[k] = v
			}
		}
		if in.Properties == nil {
			in.Properties = map[string]any{}
		}
		tp := &ant.ToolParam{Name: t.Name, InputSchema: in}
		if t.Description != "" {
			tp.Description = ant.String(t.Description)
		}
		p.Tools = append(p.Tools, ant.ToolUnionParam{OfTool: tp})
	}
	return p, nil
}

func (m *Model) response(out *ant.Message) conch.ModelResponse {
	resp := conch.ModelResponse{
		Model: string(out.Model),
		Usage: conch.Usage{
			// input_tokens excludes cached tokens; count them, as OpenAI's
			// prompt_tokens does; cache reads are the cached part (cache
			// writes are billed as input).
			InputTokens:  int(out.Usage.InputTokens + out.Usage.CacheReadInputTokens + out.Usage.CacheCreationInputTokens),
			CachedTokens: int(out.Usage.CacheReadInputTokens),
			OutputTokens: int(out.Usage.OutputTokens),
		},
	}
	if resp.Model == "" {
		resp.Model = m.model
	}
	var texts []string
	for _, b := range out.Content {
		switch b.Type {
		case "text":
			texts = append(texts, b.Text)
		case "tool_use":
			args := json.RawMessage(b.Input)
			if len(args) == 0 {
				args = json.RawMessage("{}")
			}
			resp.ToolCalls = append(resp.ToolCalls, conch.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		}
	}
	resp.Text = strings.Join(texts, "")
	switch out.StopReason {
	case ant.StopReasonEndTurn, ant.StopReasonStopSequence:
		resp.StopReason = conch.StopEnd
	case ant.StopReasonToolUse:
		resp.StopReason = conch.StopToolUse
	case ant.StopReasonMaxTokens, ant.StopReasonModelContextWindowExceeded:
		resp.StopReason = conch.StopMaxTokens
	default:
		resp.StopReason = conch.StopOther
	}
	if len(resp.ToolCalls) > 0 && resp.StopReason == conch.StopEnd {
		resp.StopReason = conch.StopToolUse
	}
	return resp
}

func (m *Model) fail(ctx context.Context, op string, err error, httpResp *http.Response) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", op, ctx.Err())
	}
	var apiErr *ant.Error
	if errors.As(err, &apiErr) {
		msg := apiErr.Message
		if msg == "" {
			msg = strings.TrimSpace(apiErr.RawJSON())
		}
		if msg == "" {
			msg = http.StatusText(apiErr.StatusCode)
		}
		var h http.Header
		if apiErr.Response != nil {
			h = apiErr.Response.Header
		}
		return fmt.Errorf("%s: %w", op, llmerr.HTTP(apiErr.StatusCode, h, string(apiErr.Type()), msg, err))
	}
	if httpResp != nil && httpResp.StatusCode >= 400 {
		var body []byte
		if httpResp.Body != nil {
			body, _ = io.ReadAll(io.LimitReader(httpResp.Body, 4096))
		}
		msg := strings.TrimSpace(string(body))
		if msg == "" {
			msg = http.StatusText(httpResp.StatusCode)
		}
		return fmt.Errorf("%s: %w", op, llmerr.HTTP(httpResp.StatusCode, httpResp.Header, "", msg, err))
	}
	return fmt.Errorf("%s: %w", op, llmerr.Transport(ctx, m.timeout, err))
}
