package fakellm

import "net/http"

// Anthropic Messages streaming ("stream": true): named events, each with
// its "type" repeated in the data. message_start carries the message with
// empty content and the input usage; each content block is
// content_block_start (text "" or tool_use with input {}), deltas
// (text_delta, or input_json_delta whose partial_json pieces join to the
// input; the first is ""), content_block_stop; a ping follows the first
// block's start; message_delta carries stop_reason and the final usage;
// message_stop ends the stream. An error inside the stream is
// "event: error" with {"type":"error","error":{"type":…,"message":…}}.

type antStreamUsage struct {
	InputTokens              int    `json:"input_tokens"`
	CacheCreationInputTokens int    `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int    `json:"cache_read_input_tokens"`
	OutputTokens             int    `json:"output_tokens"`
	ServiceTier              string `json:"service_tier,omitempty"`
}

type antDelta struct {
	Type        string  `json:"type"`
	Text        *string `json:"text,omitempty"`
	PartialJSON *string `json:"partial_json,omitempty"`
}

func (s *Server) writeAnthropicStream(w http.ResponseWriter, r *http.Request, req *Request, reply Reply, id uint64) {
	whole := anthropicResponse(req, reply, id)
	e := s.newSSE(w, r, reply, false)
	fail := func(er Reply) { e.event("error", anthropicError(er, s.nextID())) }

	start := map[string]any{
		"id": whole.ID, "type": "message", "role": "assistant", "model": whole.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": antStreamUsage{InputTokens: whole.Usage.InputTokens, CacheReadInputTokens: whole.Usage.CacheReadInputTokens, OutputTokens: 1, ServiceTier: "standard"},
	}
	if !e.event("message_start", map[string]any{"type": "message_start", "message": start}) {
		return
	}
	index := 0
	block := func(b antOutBlock, deltas []antDelta) bool {
		cb := map[string]any{"type": b.Type}
		if b.Type == "text" {
			cb["text"] = ""
		} else {
			cb["id"], cb["name"], cb["input"] = b.ID, b.Name, map[string]any{}
		}
		if !e.event("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": cb}) {
			return false
		}
		if index == 0 && !e.event("ping", map[string]any{"type": "ping"}) {
			return false
		}
		for i, d := range deltas {
			// The first (empty) input_json_delta is not a chunk of content.
			if (d.PartialJSON == nil || i > 0) && !e.chunk() {
				e.stopped(fail)
				return false
			}
			if !e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": d}) {
				return false
			}
		}
		if !e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index}) {
			return false
		}
		index++
		return true
	}
	for _, b := range whole.Content {
		var deltas []antDelta
		if b.Type == "text" {
			for _, t := range reply.textChunks() {
				deltas = append(deltas, antDelta{Type: "text_delta", Text: &t})
			}
		} else {
			first := ""
			deltas = append(deltas, antDelta{Type: "input_json_delta", PartialJSON: &first})
			for _, a := range splitArgs(string(b.Input)) {
				deltas = append(deltas, antDelta{Type: "input_json_delta", PartialJSON: &a})
			}
		}
		if !block(b, deltas) {
			return
		}
	}
	if e.stopped(fail) {
		return
	}
	u := antStreamUsage{InputTokens: whole.Usage.InputTokens, CacheReadInputTokens: whole.Usage.CacheReadInputTokens, OutputTokens: whole.Usage.OutputTokens}
	if !e.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": whole.StopReason, "stop_sequence": nil}, "usage": u}) {
		return
	}
	e.event("message_stop", map[string]any{"type": "message_stop"})
}
