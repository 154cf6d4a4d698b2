// Package gemini implements conch.Model over the Gemini API (the Developer
// API with an API key, not Vertex AI) with the official SDK
// (google.golang.org/genai).
//
// The SDK's own retries are off and the GOOGLE_*/GEMINI_* environment
// variables do not apply: the agent loop owns retries, and the config is the
// only source of settings.
//
// Tool-call ids: Gemini function calls often carry no id. The model then
// synthesises one ("gensyn_…") and maps tool results back by name. Gemini
// 2.5 and later attach a thoughtSignature to function calls that must be sent
// back with them; conch.ToolCall has no field for it, so it rides in the id
// after "#ts=" (base64url). Both are invisible to callers, who treat ids as
// opaque, and survive a restart because they live in the stored history.
package gemini

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"google.golang.org/genai"

	"conch"
	"conch/llm/internal/convert"
	"conch/llm/internal/llmerr"
)

// DefaultBaseURL is the Gemini API; the SDK appends
// "v1beta/models/{model}:generateContent".
const DefaultBaseURL = "https://generativelanguage.googleapis.com/"

// DefaultTimeout bounds one call when Config.Timeout is zero.
const DefaultTimeout = 10 * time.Minute

const (
	synthPrefix = "gensyn_"
	sigSep      = "#ts="
)

// Config configures a Model.
type Config struct {
	// BaseURL is the API root without the version; DefaultBaseURL when empty.
	BaseURL string
	// APIKey is sent as x-goog-api-key. Required.
	APIKey string
	// Model is the model id, e.g. "gemini-2.5-flash". Required.
	Model string
	// Timeout bounds one call; DefaultTimeout when zero.
	Timeout time.Duration
	// HTTPClient sends the requests; a client with its own transport when
	// nil. Its transport is wrapped, never modified.
	HTTPClient *http.Client
	// MaxTokens is the output limit for requests that set none; 0 leaves it
	// to the server.
	MaxTokens int
}

// Model is a Gemini model. It is safe for concurrent use.
type Model struct {
	model     string
	timeout   time.Duration
	maxTokens int
	client    *genai.Client
}

var (
	_ conch.Model          = (*Model)(nil)
	_ conch.StreamingModel = (*Model)(nil)
)

// New returns a Model for cfg.
func New(cfg Config) (*Model, error) {
	if cfg.Model == "" {
		return nil, errors.New("gemini: config: Model is required (e.g. \"gemini-2.5-flash\")")
	}
	if cfg.APIKey == "" {
		return nil, errors.New("gemini: config: APIKey is required")
	}
	base := strings.TrimSpace(cfg.BaseURL)
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("gemini: config: BaseURL %q is not an http(s) URL (e.g. %q)", cfg.BaseURL, DefaultBaseURL)
	}
	if p := strings.TrimRight(u.Path, "/"); strings.HasSuffix(p, "/v1beta") || strings.HasSuffix(p, "/v1") {
		return nil, fmt.Errorf("gemini: config: BaseURL %q must not end in the API version: the SDK appends it", cfg.BaseURL)
	}
	if cfg.Timeout < 0 || cfg.MaxTokens < 0 {
		return nil, errors.New("gemini: config: Timeout and MaxTokens must not be negative")
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	hc := &http.Client{}
	if cfg.HTTPClient != nil {
		*hc = *cfg.HTTPClient
	}
	next := hc.Transport
	if next == nil {
		next = http.DefaultTransport.(*http.Transport).Clone()
	}
	hc.Transport = headerCapture{next: next}
	one := int32(1)
	// NewClient does no I/O with an API key on the Gemini API backend.
	client, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey:     cfg.APIKey,
		Backend:    genai.BackendGeminiAPI,
		HTTPClient: hc,
		HTTPOptions: genai.HTTPOptions{
			BaseURL:      base,
			RetryOptions: &genai.HTTPRetryOptions{Attempts: &one},
		},
	})
	if err != nil {
		// The SDK's message can print the whole config, key included.
		return nil, errors.New("gemini: new client: the SDK refused the config")
	}
	return &Model{model: cfg.Model, timeout: timeout, maxTokens: cfg.MaxTokens, client: client}, nil
}

// Name returns "gemini/<model>".
func (m *Model) Name() string { return "gemini/" + m.model }

// Generate sends one generateContent request.
func (m *Model) Generate(ctx context.Context, req conch.ModelRequest) (conch.ModelResponse, error) {
	const op = "gemini generate"
	contents, config, err := m.params(req)
	if err != nil {
		return conch.ModelResponse{}, fmt.Errorf("%s: %w", op, err)
	}
	callCtx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	captured := &capturedHeader{}
	callCtx = context.WithValue(callCtx, capturedKey{}, captured)
	start := time.Now()
	out, err := m.client.Models.GenerateContent(callCtx, m.model, contents, config)
	if err != nil {
		return conch.ModelResponse{}, m.fail(ctx, op, err, captured.header)
	}
	resp, err := m.response(out)
	if err != nil {
		return conch.ModelResponse{}, fmt.Errorf("%s: %w", op, err)
	}
	resp.Duration = time.Since(start)
	return resp, nil
}

// foreignSignature is the thought signature Gemini 3 accepts on function
// calls it did not write (ai.google.dev/gemini-api/docs/thought-signatures).
const foreignSignature = "skip_thought_signature_validator"

// splitID takes a conch call id apart: the id to send to the API (empty for
// a synthesised one) and the thought signature.
func splitID(id string) (apiID string, sig []byte) {
	apiID, enc, found := strings.Cut(id, sigSep)
	if found {
		sig, _ = base64.RawURLEncoding.DecodeString(enc)
	}
	if strings.HasPrefix(apiID, synthPrefix) {
		apiID = ""
	}
	return apiID, sig
}

// joinID builds the conch call id for a function call from the API.
func joinID(apiID string, sig []byte) string {
	if apiID == "" {
		apiID = convert.NewID(synthPrefix)
	}
	if len(sig) > 0 {
		apiID += sigSep + base64.RawURLEncoding.EncodeToString(sig)
	}
	return apiID
}

func (m *Model) params(req conch.ModelRequest) ([]*genai.Content, *genai.GenerateContentConfig, error) {
	config := &genai.GenerateContentConfig{}
	if req.System != "" {
		config.SystemInstruction = &genai.Content{Parts: []*genai.Part{{Text: req.System}}}
	}
	if n := req.MaxTokens; n > 0 {
		config.MaxOutputTokens = int32(n)
	} else if m.maxTokens > 0 {
		config.MaxOutputTokens = int32(m.maxTokens)
	}
	names := convert.ToolNames(req.Messages)
	var contents []*genai.Content
	// add merges parts into the last content when it has the same role: all
	// function responses of a turn must be in one content, matching the
	// calls one to one.
	add := func(role string, parts ...*genai.Part) {
		if len(parts) == 0 {
			return
		}
		if n := len(contents); n > 0 && contents[n-1].Role == role {
			contents[n-1].Parts = append(contents[n-1].Parts, parts...)
			return
		}
		contents = append(contents, &genai.Content{Role: role, Parts: parts})
	}
	// The pictures of a run of tool results follow the run.
	var tail []*genai.Part
	for i, msg := range req.Messages {
		if msg.Role != conch.RoleTool && len(tail) > 0 {
			add(genai.RoleUser, tail...)
			tail = nil
		}
		switch msg.Role {
		case conch.RoleUser:
			if err := convert.CheckImages(fmt.Sprintf("message %d", i), msg.Images); err != nil {
				return nil, nil, err
			}
			for _, im := range msg.Images {
				add(genai.RoleUser, &genai.Part{InlineData: &genai.Blob{MIMEType: im.MediaType, Data: im.Data}})
			}
			if msg.Text != "" {
				add(genai.RoleUser, &genai.Part{Text: msg.Text})
			}
		case conch.RoleAssistant:
			var parts []*genai.Part
			if msg.Text != "" {
				parts = append(parts, &genai.Part{Text: msg.Text})
			}
			// A step whose calls carry no thought signature came from
			// another provider (a fallback answered it); Gemini 3 refuses
			// unsigned calls of the current turn, and documents this value
			// for histories it did not write.
			foreign := len(msg.ToolCalls) > 0 && strings.HasPrefix(m.model, "gemini-3")
			for _, c := range msg.ToolCalls {
				if _, sig := splitID(c.ID); len(sig) > 0 {
					foreign = false
				}
			}
			for j, c := range msg.ToolCalls {
				var args map[string]any
				if err := json.Unmarshal(convert.ArgsObject(c.Arguments), &args); err != nil {
					return nil, nil, convert.BadRequest(fmt.Sprintf("message %d: tool call %q: arguments", i, c.Name), err)
				}
				apiID, sig := splitID(c.ID)
				if foreign && j == 0 {
					sig = []byte(foreignSignature)
				}
				parts = append(parts, &genai.Part{
					FunctionCall:     &genai.FunctionCall{ID: apiID, Name: c.Name, Args: args},
					ThoughtSignature: sig,
				})
			}
			add(genai.RoleModel, parts...)
		case conch.RoleTool:
			r := msg.ToolResult
			if r == nil {
				return nil, nil, convert.BadRequest(fmt.Sprintf("message %d: a tool message without a ToolResult", i), nil)
			}
			name := r.Name
			if name == "" {
				name = names[r.CallID]
			}
			if name == "" {
				return nil, nil, convert.BadRequest(fmt.Sprintf("message %d: tool result for call %q has no tool name, and no call in the history has that id", i, r.CallID), nil)
			}
			apiID, _ := splitID(r.CallID)
			key := "output"
			if r.IsError {
				key = "error"
			}
			add(genai.RoleUser, &genai.Part{FunctionResponse: &genai.FunctionResponse{
				ID: apiID, Name: name, Response: map[string]any{key: r.Content},
			}})
			// Function responses carry no pictures on every Gemini model:
			// they follow as inline parts of the same user turn.
			if err := convert.CheckImages(fmt.Sprintf("message %d", i), r.Images); err != nil {
				return nil, nil, err
			}
			if len(r.Images) > 0 {
				tail = append(tail, &genai.Part{Text: convert.ToolImagesNote(r)})
			}
			for _, im := range r.Images {
				tail = append(tail, &genai.Part{InlineData: &genai.Blob{MIMEType: im.MediaType, Data: im.Data}})
			}
		default:
			return nil, nil, convert.BadRequest(fmt.Sprintf("message %d: unknown role %q", i, msg.Role), nil)
		}
	}
	add(genai.RoleUser, tail...)
	if len(req.Tools) > 0 {
		tool := &genai.Tool{}
		for _, t := range req.Tools {
			schema, err := convert.Schema(t)
			if err != nil {
				return nil, nil, err
			}
			tool.FunctionDeclarations = append(tool.FunctionDeclarations, &genai.FunctionDeclaration{
				Name: t.Name, Description: t.Description, ParametersJsonSchema: schema,
			})
		}
		config.Tools = []*genai.Tool{tool}
	}
	return contents, config, nil
}

func (m *Model) response(out *genai.GenerateContentResponse) (conch.ModelResponse, error) {
	resp := conch.ModelResponse{Model: out.ModelVersion}
	if resp.Model == "" {
		resp.Model = m.model
	}
	if u := out.UsageMetadata; u != nil {
		resp.Usage = conch.Usage{
			InputTokens:  int(u.PromptTokenCount),
			CachedTokens: int(u.CachedContentTokenCount),
			OutputTokens: int(u.CandidatesTokenCount + u.ThoughtsTokenCount),
		}
	}
	if len(out.Candidates) == 0 {
		reason := "no candidates"
		if pf := out.PromptFeedback; pf != nil && pf.BlockReason != "" {
			reason = "the prompt was blocked: " + string(pf.BlockReason)
			if pf.BlockReasonMessage != "" {
				reason += " (" + pf.BlockReasonMessage + ")"
			}
		}
		return resp, convert.BadRequest(reason, nil)
	}
	cand := out.Candidates[0]
	var texts []string
	if cand.Content != nil {
		for _, p := range cand.Content.Parts {
			switch {
			case p.FunctionCall != nil:
				args, err := json.Marshal(p.FunctionCall.Args)
				if err != nil || p.FunctionCall.Args == nil {
					args = json.RawMessage("{}")
				}
				resp.ToolCalls = append(resp.ToolCalls, conch.ToolCall{
					ID: joinID(p.FunctionCall.ID, p.ThoughtSignature), Name: p.FunctionCall.Name, Arguments: args,
				})
			case p.Thought:
			case p.Text != "":
				texts = append(texts, p.Text)
			}
		}
	}
	resp.Text = strings.Join(texts, "")
	switch cand.FinishReason {
	case genai.FinishReasonStop:
		resp.StopReason = conch.StopEnd
	case genai.FinishReasonMaxTokens:
		resp.StopReason = conch.StopMaxTokens
	default:
		resp.StopReason = conch.StopOther
	}
	if len(resp.ToolCalls) > 0 && resp.StopReason == conch.StopEnd {
		// Gemini says STOP for function calls too.
		resp.StopReason = conch.StopToolUse
	}
	return resp, nil
}

func (m *Model) fail(ctx context.Context, op string, err error, header http.Header) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", op, ctx.Err())
	}
	var apiErr genai.APIError
	if errors.As(err, &apiErr) {
		return fmt.Errorf("%s: %w", op, classify(apiErr, header, err))
	}
	var apiErrPtr *genai.APIError
	if errors.As(err, &apiErrPtr) && apiErrPtr != nil {
		return fmt.Errorf("%s: %w", op, classify(*apiErrPtr, header, err))
	}
	return fmt.Errorf("%s: %w", op, llmerr.Transport(ctx, m.timeout, err))
}

func classify(e genai.APIError, header http.Header, err error) *conch.ModelError {
	msg := e.Message
	if msg == "" {
		msg = e.Status
	}
	me := llmerr.HTTP(e.Code, header, e.Status, msg, err)
	if e.Code == http.StatusBadRequest && invalidKey(e) {
		// Gemini answers a bad API key with 400 INVALID_ARGUMENT, not 401.
		me.Kind = conch.KindAuth
	}
	if me.RetryAfter == 0 {
		me.RetryAfter = retryInfo(e.Details)
	}
	return me
}

func invalidKey(e genai.APIError) bool {
	if strings.Contains(e.Message, "API key not valid") || strings.Contains(e.Message, "API key expired") {
		return true
	}
	for _, d := range e.Details {
		if r, _ := d["reason"].(string); r == "API_KEY_INVALID" || r == "API_KEY_EXPIRED" {
			return true
		}
	}
	return false
}

// retryInfo reads google.rpc.RetryInfo.retryDelay from error details, which
// is how the Gemini API says how long to wait after a 429.
func retryInfo(details []map[string]any) time.Duration {
	for _, d := range details {
		if t, _ := d["@type"].(string); !strings.HasSuffix(t, "google.rpc.RetryInfo") {
			continue
		}
		if s, ok := d["retryDelay"].(string); ok {
			return llmerr.ProtoDuration(s)
		}
	}
	return 0
}

// The SDK's APIError drops the response headers, so a wrapper around the
// transport keeps the headers of an error answer for the call that made it.
// The slot travels in the request context, set by Generate for its own call
// only; nothing else reads it.
type (
	capturedKey    struct{}
	capturedHeader struct{ header http.Header }
	headerCapture  struct{ next http.RoundTripper }
)

func (t headerCapture) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if resp != nil && resp.StatusCode >= 400 {
		if c, ok := r.Context().Value(capturedKey{}).(*capturedHeader); ok {
			c.header = resp.Header.Clone()
		}
	}
	return resp, err
}
