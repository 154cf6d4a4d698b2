package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	ant "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"conch"
	"conch/llm/internal/llmerr"
)

// GenerateStream sends one Messages request as a stream, handing each
// text_delta to onText as it arrives, and returns the same response Generate
// would (the events accumulated with Message.Accumulate). An error event in
// the stream (overloaded_error, …) is classified as the HTTP error its type
// stands for; a stream that ends without message_stop is a transient error,
// not a partial answer.
func (m *Model) GenerateStream(ctx context.Context, req conch.ModelRequest, onText func(delta string)) (conch.ModelResponse, error) {
	const op = "anthropic generate stream"
	params, err := m.params(req)
	if err != nil {
		return conch.ModelResponse{}, fmt.Errorf("%s: %w", op, err)
	}
	callCtx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	start := time.Now()
	var httpResp *http.Response
	stream := m.client.Messages.NewStreaming(callCtx, params, option.WithResponseInto(&httpResp))
	defer stream.Close()
	var msg ant.Message
	stopped := false
	for stream.Next() {
		ev := stream.Current()
		if err := msg.Accumulate(ev); err != nil {
			return conch.ModelResponse{}, fmt.Errorf("%s: %w", op, &conch.ModelError{Kind: conch.KindInternal,
				Message: "an event does not continue the stream: " + err.Error(), Err: err})
		}
		switch ev.Type {
		case "content_block_delta":
			if ev.Delta.Type == "text_delta" && ev.Delta.Text != "" {
				onText(ev.Delta.Text)
			}
		case "message_stop":
			stopped = true
		}
	}
	if err := stream.Err(); err != nil {
		return conch.ModelResponse{}, m.streamFail(ctx, op, err, httpResp)
	}
	if !stopped {
		return conch.ModelResponse{}, fmt.Errorf("%s: %w", op, llmerr.Truncated("no message_stop"))
	}
	resp := m.response(&msg)
	resp.Duration = time.Since(start)
	return resp, nil
}

// streamFail maps a failed stream. The SDK reports an error event as an
// *ant.Error with the stream's own status (200); it is classified by its
// type. Anything else is mapped as Generate maps it.
func (m *Model) streamFail(ctx context.Context, op string, err error, httpResp *http.Response) error {
	var apiErr *ant.Error
	if ctx.Err() == nil && errors.As(err, &apiErr) && apiErr.StatusCode < 400 {
		typ := string(apiErr.Type())
		if typ == "" {
			var body struct {
				Error struct {
					Type string `json:"type"`
				} `json:"error"`
			}
			_ = json.Unmarshal([]byte(apiErr.RawJSON()), &body)
			typ = body.Error.Type
		}
		msg := apiErr.Message
		if msg == "" {
			msg = strings.TrimSpace(apiErr.RawJSON())
		}
		var h http.Header
		if httpResp != nil {
			h = httpResp.Header
		}
		return fmt.Errorf("%s: %w", op, llmerr.InStream(errorStatus(typ), h, typ, msg, err))
	}
	return m.fail(ctx, op, err, httpResp)
}

// errorStatus is the HTTP status Anthropic answers an error of this type
// with (its errors reference); 0 when unknown.
func errorStatus(typ string) int {
	switch typ {
	case "invalid_request_error":
		return http.StatusBadRequest
	case "authentication_error":
		return http.StatusUnauthorized
	case "billing_error":
		return http.StatusPaymentRequired
	case "permission_error":
		return http.StatusForbidden
	case "not_found_error":
		return http.StatusNotFound
	case "request_too_large":
		return http.StatusRequestEntityTooLarge
	case "rate_limit_error":
		return http.StatusTooManyRequests
	case "api_error":
		return http.StatusInternalServerError
	case "timeout_error":
		return http.StatusGatewayTimeout
	case "overloaded_error":
		return 529
	}
	return 0
}
