package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"conch"
	"conch/llm/internal/llmerr"
)

// GenerateStream runs one chat completion as a stream ("stream": true, with
// stream_options.include_usage for the usage), handing each piece of text to
// onText as it arrives, and returns the same response Generate would. A
// stream that ends without a finish_reason is a transient error, not a
// partial answer.
func (m *Model) GenerateStream(ctx context.Context, req conch.ModelRequest, onText func(delta string)) (conch.ModelResponse, error) {
	const op = "openai generate stream"
	params, err := m.params(req)
	if err != nil {
		return conch.ModelResponse{}, fmt.Errorf("%s: %w", op, err)
	}
	params.StreamOptions = oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)}
	callCtx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	start := time.Now()
	var httpResp *http.Response
	stream := m.svc.NewStreaming(callCtx, params, option.WithResponseInto(&httpResp))
	defer stream.Close()
	var acc oai.ChatCompletionAccumulator
	finished, wroteContent := false, false
	for stream.Next() {
		chunk := stream.Current()
		if !acc.AddChunk(chunk) {
			return conch.ModelResponse{}, fmt.Errorf("%s: %w", op, &conch.ModelError{Kind: conch.KindInternal,
				Message: "a chunk does not continue the stream", Err: errors.New("chunk refused by the accumulator: " + chunk.RawJSON())})
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue // n is never set: one choice
			}
			if ch.FinishReason != "" {
				finished = true
			}
			switch {
			case ch.Delta.Content != "":
				wroteContent = true
				onText(ch.Delta.Content)
			case ch.Delta.Refusal != "" && !wroteContent:
				// Generate answers a refusal as the text when there is no content.
				onText(ch.Delta.Refusal)
			}
		}
	}
	if err := stream.Err(); err != nil {
		return conch.ModelResponse{}, m.streamFail(ctx, op, err, httpResp)
	}
	if !finished {
		return conch.ModelResponse{}, fmt.Errorf("%s: %w", op, llmerr.Truncated("no finish_reason"))
	}
	resp, err := m.response(&acc.ChatCompletion)
	if err != nil {
		return conch.ModelResponse{}, fmt.Errorf("%s: %w", op, err)
	}
	resp.Duration = time.Since(start)
	return resp, nil
}

// streamFail maps a failed stream: an error chunk inside the stream as the
// HTTP error its type stands for, anything else as Generate does.
func (m *Model) streamFail(ctx context.Context, op string, err error, httpResp *http.Response) error {
	var se *ssestream.StreamError
	if ctx.Err() == nil && errors.As(err, &se) {
		var h http.Header
		if httpResp != nil {
			h = httpResp.Header
		}
		return fmt.Errorf("%s: %w", op, streamError(se.Event.Data, h, err))
	}
	return m.fail(ctx, op, err, httpResp)
}

// streamError reads an error chunk, {"error": {"message", "type", "code"}};
// OpenRouter puts the upstream's HTTP status in code.
func streamError(data []byte, h http.Header, cause error) *conch.ModelError {
	var body struct {
		Error struct {
			Code    json.RawMessage `json:"code"`
			Message string          `json:"message"`
			Type    string          `json:"type"`
		} `json:"error"`
	}
	_ = json.Unmarshal(data, &body)
	var status int
	var code string
	if json.Unmarshal(body.Error.Code, &status) != nil {
		_ = json.Unmarshal(body.Error.Code, &code)
	}
	if status == 0 {
		status = errorStatus(body.Error.Type, code)
	}
	msg := body.Error.Message
	if msg == "" {
		msg = strings.TrimSpace(string(data))
	}
	return llmerr.InStream(status, h, code, msg, cause)
}

// errorStatus is the HTTP status OpenAI answers an error of this type and
// code with; 0 when unknown.
func errorStatus(typ, code string) int {
	switch {
	case code == "rate_limit_exceeded" || code == "insufficient_quota" || typ == "requests" || typ == "tokens" || typ == "rate_limit_error":
		return http.StatusTooManyRequests
	case code == "invalid_api_key" || typ == "authentication_error":
		return http.StatusUnauthorized
	case code == "model_not_found":
		return http.StatusNotFound
	case typ == "invalid_request_error":
		return http.StatusBadRequest
	case typ == "server_error" || typ == "api_error":
		return http.StatusInternalServerError
	}
	return 0
}
