package fakellm

import (
	"crypto/x509"
	"net/http"
)

// Gemini streamGenerateContent?alt=sse wire format, as the Gemini API sends
// it and the @google/genai SDK (used by the Gemini CLI) reads it: a
// text/event-stream of "data: {GenerateContentResponse}\r\n\r\n" events.
// Every event is a whole GenerateContentResponse carrying the next piece of
// the candidate; text comes in several events, function calls whole, and
// the last event carries the finishReason and the final usage. Without
// alt=sse the API streams one JSON array, which this fake does not speak.

// TLS serves the fake over HTTPS (httptest's self-signed certificate for
// 127.0.0.1); Certificate returns it for the client's trust store.
func TLS() Option { return func(s *Server) { s.tls = true } }

// Certificate is the server's certificate when it was started with TLS,
// else nil.
func (s *Server) Certificate() *x509.Certificate {
	if !s.tls {
		return nil
	}
	return s.srv.Certificate()
}

// geminiSSE reports whether a Gemini streaming request asks for the
// server-sent-events form (alt=sse), the only one the fake speaks.
func geminiSSE(r *http.Request) bool { return r.URL.Query().Get("alt") == "sse" }

type gemStreamCandidate struct {
	Content struct {
		Parts []gemOutPart `json:"parts"`
		Role  string       `json:"role"`
	} `json:"content"`
	FinishReason string `json:"finishReason,omitempty"`
	Index        int    `json:"index"`
}

type gemStreamUsage struct {
	PromptTokenCount     int `json:"promptTokenCount"`
	CandidatesTokenCount int `json:"candidatesTokenCount,omitempty"`
	TotalTokenCount      int `json:"totalTokenCount"`
	CachedContentTokens  int `json:"cachedContentTokenCount,omitempty"`
}

type gemStreamEvent struct {
	Candidates    []gemStreamCandidate `json:"candidates"`
	UsageMetadata gemStreamUsage       `json:"usageMetadata"`
	ModelVersion  string               `json:"modelVersion"`
	ResponseID    string               `json:"responseId"`
}

// geminiStream is the events of the answer r to req, in order: one per
// text chunk, the function calls whole in one event, and the finishReason
// with the final usage on the last event.
func geminiStream(req *Request, r Reply, id uint64) []gemStreamEvent {
	whole := geminiResponse(req, r, id)
	c := whole.Candidates[0]
	u := whole.UsageMetadata
	var calls []gemOutPart
	for _, p := range c.Content.Parts {
		if p.FunctionCall != nil {
			calls = append(calls, p)
		}
	}
	event := func(parts []gemOutPart) gemStreamEvent {
		e := gemStreamEvent{ModelVersion: whole.ModelVersion, ResponseID: whole.ResponseID,
			UsageMetadata: gemStreamUsage{PromptTokenCount: u.PromptTokenCount, TotalTokenCount: u.PromptTokenCount}}
		e.Candidates = make([]gemStreamCandidate, 1)
		e.Candidates[0].Content.Role = "model"
		e.Candidates[0].Content.Parts = parts
		return e
	}
	var out []gemStreamEvent
	for _, t := range r.textChunks() {
		out = append(out, event([]gemOutPart{{Text: t}}))
	}
	if len(calls) > 0 || len(out) == 0 {
		if calls == nil {
			calls = []gemOutPart{}
		}
		out = append(out, event(calls))
	}
	last := &out[len(out)-1]
	last.Candidates[0].FinishReason = c.FinishReason
	last.UsageMetadata = gemStreamUsage{PromptTokenCount: u.PromptTokenCount, CandidatesTokenCount: u.CandidatesTokenCount, TotalTokenCount: u.TotalTokenCount, CachedContentTokens: u.CachedContentTokens}
	return out
}

// writeGeminiStream answers a streamGenerateContent?alt=sse request, every
// event a chunk. A stream the script stops at its end sends the last chunk
// without its finishReason and final usage. An error inside the stream is a
// data event holding {"error": {code, message, status}}.
func (s *Server) writeGeminiStream(w http.ResponseWriter, r *http.Request, req *Request, reply Reply, id uint64) {
	events := geminiStream(req, reply, id)
	e := s.newSSE(w, r, reply, true)
	fail := func(er Reply) { e.event("", geminiError(er)) }
	for i, ev := range events {
		if !e.chunk() {
			e.stopped(fail)
			return
		}
		if i == len(events)-1 && reply.stop != stopNone {
			ev.Candidates[0].FinishReason = ""
			in := ev.UsageMetadata.PromptTokenCount
			ev.UsageMetadata = gemStreamUsage{PromptTokenCount: in, TotalTokenCount: in}
			if e.event("", ev) {
				e.stopped(fail)
			}
			return
		}
		if !e.event("", ev) {
			return
		}
	}
}
