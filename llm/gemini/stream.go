package gemini

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/genai"

	"conch"
	"conch/llm/internal/llmerr"
)

// GenerateStream sends one streamGenerateContent request (server-sent
// events), handing each piece of text to onText as it arrives, and returns
// the same response Generate would: the chunks' parts gathered into one
// candidate (function calls with their thought signatures, in the id as
// Generate does), the last usage and finish reason. An error object in the
// stream is classified by its code as Generate classifies the same answer;
// a stream that ends without a finishReason (or a blocked prompt) is a
// transient error, not a partial answer. The SDK's automatic continuation
// (it reconnects a broken stream) is off: the agent loop owns retries.
func (m *Model) GenerateStream(ctx context.Context, req conch.ModelRequest, onText func(delta string)) (conch.ModelResponse, error) {
	const op = "gemini generate stream"
	contents, config, err := m.params(req)
	if err != nil {
		return conch.ModelResponse{}, fmt.Errorf("%s: %w", op, err)
	}
	config.AutomaticContinuation = genai.Ptr(false)
	callCtx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	captured := &capturedHeader{}
	callCtx = context.WithValue(callCtx, capturedKey{}, captured)
	start := time.Now()
	out := &genai.GenerateContentResponse{}
	var cand *genai.Candidate
	finished := false
	for chunk, err := range m.client.Models.GenerateContentStream(callCtx, m.model, contents, config) {
		if err != nil {
			return conch.ModelResponse{}, m.fail(ctx, op, err, captured.header)
		}
		if chunk == nil {
			continue
		}
		if chunk.ModelVersion != "" {
			out.ModelVersion = chunk.ModelVersion
		}
		if chunk.UsageMetadata != nil {
			out.UsageMetadata = chunk.UsageMetadata // cumulative: the last one counts
		}
		if pf := chunk.PromptFeedback; pf != nil {
			out.PromptFeedback = pf
			finished = finished || pf.BlockReason != ""
		}
		if len(chunk.Candidates) == 0 || chunk.Candidates[0] == nil {
			continue
		}
		c := chunk.Candidates[0]
		if cand == nil {
			cand = &genai.Candidate{Content: &genai.Content{Role: genai.RoleModel}}
			out.Candidates = []*genai.Candidate{cand}
		}
		if c.Content != nil {
			for _, p := range c.Content.Parts {
				if p == nil {
					continue
				}
				if p.Text != "" && !p.Thought && p.FunctionCall == nil {
					onText(p.Text)
				}
				cand.Content.Parts = append(cand.Content.Parts, p)
			}
		}
		if c.FinishReason != "" && c.FinishReason != genai.FinishReasonUnspecified {
			cand.FinishReason = c.FinishReason
			finished = true
		}
	}
	if !finished {
		return conch.ModelResponse{}, fmt.Errorf("%s: %w", op, llmerr.Truncated("no finishReason"))
	}
	resp, err := m.response(out)
	if err != nil {
		return conch.ModelResponse{}, fmt.Errorf("%s: %w", op, err)
	}
	resp.Duration = time.Since(start)
	return resp, nil
}
