package fakellm

import (
	"net/http"
)

// OpenAI Responses streaming ("stream": true): named events, each with its
// "type" repeated in the data and a "sequence_number" counting from 0:
// response.created and response.in_progress (the response in progress,
// without output or usage); per output item response.output_item.added (the
// item in progress, empty), then for a message response.content_part.added,
// response.output_text.delta…, response.output_text.done,
// response.content_part.done; for a function_call
// response.function_call_arguments.delta…/.done; for a custom_tool_call
// response.custom_tool_call_input.delta…/.done; then
// response.output_item.done (the whole item); last response.completed (or
// response.incomplete for MaxTokens) with the whole response and its usage.
// There is no [DONE]. An error inside the stream is response.failed: the
// response with status "failed" and error {code, message}.

func (s *Server) writeResponsesStream(w http.ResponseWriter, r *http.Request, req *Request, reply Reply, id uint64) {
	whole := responsesResponse(req, reply, id)
	e := s.newSSE(w, r, reply, false)
	seq := 0
	ev := func(name string, fields map[string]any) bool {
		fields["type"] = name
		fields["sequence_number"] = seq
		seq++
		return e.event(name, fields)
	}
	progress := *whole
	progress.Status, progress.Output, progress.Usage, progress.IncompleteDetails = "in_progress", []rspOutItem{}, nil, nil
	fail := func(er Reply) {
		failed := progress
		failed.Status = "failed"
		body := openAIError(er)["error"].(map[string]any)
		code := body["code"]
		if code == nil {
			code = body["type"]
		}
		failed.Error = map[string]any{"code": code, "message": body["message"]}
		ev("response.failed", map[string]any{"response": failed})
	}
	if !ev("response.created", map[string]any{"response": progress}) ||
		!ev("response.in_progress", map[string]any{"response": progress}) {
		return
	}
	for i, it := range whole.Output {
		if !ev("response.output_item.added", map[string]any{"output_index": i, "item": it.pending()}) {
			return
		}
		var pieces []string
		var deltaEvent, doneEvent, doneField string
		switch it.Type {
		case "message":
			part := rspOutContent{Type: "output_text", Annotations: []any{}, Logprobs: []any{}}
			if !ev("response.content_part.added", map[string]any{"item_id": it.ID, "output_index": i, "content_index": 0, "part": part}) {
				return
			}
			pieces, deltaEvent, doneEvent, doneField = reply.textChunks(), "response.output_text.delta", "response.output_text.done", "text"
		case "function_call":
			pieces, deltaEvent, doneEvent, doneField = splitArgs(it.payload()), "response.function_call_arguments.delta", "response.function_call_arguments.done", "arguments"
		case "custom_tool_call":
			pieces, deltaEvent, doneEvent, doneField = splitArgs(it.payload()), "response.custom_tool_call_input.delta", "response.custom_tool_call_input.done", "input"
		}
		for _, p := range pieces {
			if p == "" {
				continue
			}
			if !e.chunk() {
				e.stopped(fail)
				return
			}
			d := map[string]any{"item_id": it.ID, "output_index": i, "delta": p}
			if it.Type == "message" {
				d["content_index"], d["logprobs"] = 0, []any{}
			}
			if !ev(deltaEvent, d) {
				return
			}
		}
		if e.reply.stop != stopNone && e.chunks >= e.reply.stopAfter && i == len(whole.Output)-1 {
			e.stopped(fail) // the content is all sent; the script ends the stream before the done events
			return
		}
		done := map[string]any{"item_id": it.ID, "output_index": i, doneField: it.payload()}
		switch it.Type {
		case "message":
			done["content_index"], done["logprobs"] = 0, []any{}
		case "function_call":
			done["name"] = it.Name
		}
		if !ev(doneEvent, done) {
			return
		}
		if it.Type == "message" && !ev("response.content_part.done", map[string]any{"item_id": it.ID, "output_index": i, "content_index": 0, "part": it.Content[0]}) {
			return
		}
		if !ev("response.output_item.done", map[string]any{"output_index": i, "item": it}) {
			return
		}
	}
	if e.stopped(fail) {
		return
	}
	final := "response.completed"
	if whole.Status == "incomplete" {
		final = "response.incomplete"
	}
	ev(final, map[string]any{"response": whole})
}
