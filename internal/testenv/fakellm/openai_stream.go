package fakellm

import "net/http"

// OpenAI Chat Completions streaming ("stream": true): data-only events, each
// a chat.completion.chunk, then "data: [DONE]". The first chunk carries the
// role; text comes as delta.content; a tool call starts with a chunk holding
// its index, id, type and name (arguments "") and continues with chunks of
// arguments at the same index; the last choice chunk has an empty delta and
// the finish_reason. With stream_options.include_usage every chunk has
// "usage": null and one more chunk, with no choices, carries the usage. An
// error inside the stream is a data event holding {"error": {…}} (the SDK
// turns it into an error) and no [DONE].

type oaiChunkCall struct {
	Index    int     `json:"index"`
	ID       string  `json:"id,omitempty"`
	Type     string  `json:"type,omitempty"`
	Function oaiArgs `json:"function"`
}

type oaiArgs struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type oaiDelta struct {
	Role      string         `json:"role,omitempty"`
	Content   *string        `json:"content,omitempty"`
	Refusal   *string        `json:"refusal,omitempty"`
	ToolCalls []oaiChunkCall `json:"tool_calls,omitempty"`
}

type oaiChunkChoice struct {
	Index        int      `json:"index"`
	Delta        oaiDelta `json:"delta"`
	Logprobs     any      `json:"logprobs"`
	FinishReason *string  `json:"finish_reason"`
}

type oaiChunk struct {
	ID                string           `json:"id"`
	Object            string           `json:"object"`
	Created           int64            `json:"created"`
	Model             string           `json:"model"`
	ServiceTier       string           `json:"service_tier"`
	SystemFingerprint string           `json:"system_fingerprint"`
	Choices           []oaiChunkChoice `json:"choices"`
	Usage             any              `json:"usage,omitempty"`
}

// nullUsage marshals as null: with include_usage every chunk but the last
// says "usage": null.
type nullUsage struct{}

func (nullUsage) MarshalJSON() ([]byte, error) { return []byte("null"), nil }

func (s *Server) writeOpenAIStream(w http.ResponseWriter, r *http.Request, req *Request, reply Reply, id uint64) {
	whole := openAIResponse(req, reply, id)
	e := s.newSSE(w, r, reply, false)
	chunk := func(d oaiDelta, finish *string) oaiChunk {
		c := oaiChunk{ID: whole.ID, Object: "chat.completion.chunk", Created: whole.Created, Model: whole.Model,
			ServiceTier: whole.ServiceTier, SystemFingerprint: whole.SystemFingerprint,
			Choices: []oaiChunkChoice{{Delta: d, FinishReason: finish}}}
		if req.includeUsage {
			c.Usage = nullUsage{}
		}
		return c
	}
	fail := func(er Reply) { e.event("", openAIError(er)) }
	empty := ""
	calls := whole.Choices[0].Message.ToolCalls
	if reply.text != "" || len(calls) == 0 {
		if !e.event("", chunk(oaiDelta{Role: "assistant", Content: &empty}, nil)) {
			return
		}
	}
	for _, text := range reply.textChunks() {
		if !e.chunk() {
			e.stopped(fail)
			return
		}
		if !e.event("", chunk(oaiDelta{Content: &text}, nil)) {
			return
		}
	}
	for i, c := range calls {
		for j, args := range splitArgs(c.Function.Arguments) {
			if !e.chunk() {
				e.stopped(fail)
				return
			}
			var d oaiDelta
			if j == 0 {
				if i == 0 && reply.text == "" {
					d.Role = "assistant" // the first chunk of a calls-only answer
				}
				d.ToolCalls = []oaiChunkCall{{Index: i, ID: c.ID, Type: "function", Function: oaiArgs{Name: c.Function.Name}}}
				if !e.event("", chunk(d, nil)) {
					return
				}
				d = oaiDelta{}
			}
			d.ToolCalls = []oaiChunkCall{{Index: i, Function: oaiArgs{Arguments: args}}}
			if !e.event("", chunk(d, nil)) {
				return
			}
		}
	}
	if e.stopped(fail) {
		return
	}
	finish := whole.Choices[0].FinishReason
	if !e.event("", chunk(oaiDelta{}, &finish)) {
		return
	}
	if req.includeUsage {
		last := chunk(oaiDelta{}, nil)
		last.Choices = []oaiChunkChoice{}
		last.Usage = whole.Usage
		if !e.event("", last) {
			return
		}
	}
	e.event("", "[DONE]")
}
