package fakellm

import (
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
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
}

type gemStreamEvent struct {
	Candidates    []gemStreamCandidate `json:"candidates"`
	UsageMetadata gemStreamUsage       `json:"usageMetadata"`
	ModelVersion  string               `json:"modelVersion"`
	ResponseID    string               `json:"responseId"`
}

// geminiStream is the events of the answer r to req, in order.
func geminiStream(req *Request, r Reply, id uint64) []gemStreamEvent {
	whole := geminiResponse(req, r, id)
	c := whole.Candidates[0]
	u := whole.UsageMetadata
	var texts []string
	var calls []gemOutPart
	for _, p := range c.Content.Parts {
		if p.FunctionCall != nil {
			calls = append(calls, p)
		} else {
			texts = append(texts, splitText(p.Text, 3)...)
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
	for _, t := range texts {
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
	last.UsageMetadata = gemStreamUsage{PromptTokenCount: u.PromptTokenCount, CandidatesTokenCount: u.CandidatesTokenCount, TotalTokenCount: u.TotalTokenCount}
	return out
}

// splitText cuts s into at most n pieces at spaces, keeping every byte.
func splitText(s string, n int) []string {
	if s == "" {
		return nil
	}
	size := max(1, len(s)/n)
	var out []string
	for len(out) < n-1 && len(s) > size {
		i := strings.IndexByte(s[size:], ' ')
		if i < 0 {
			break
		}
		out = append(out, s[:size+i+1])
		s = s[size+i+1:]
	}
	return append(out, s)
}

// writeGeminiStream answers a streamGenerateContent?alt=sse request,
// flushing after every event.
func (s *Server) writeGeminiStream(w http.ResponseWriter, req *Request, reply Reply, id uint64) {
	for k, vs := range reply.header {
		w.Header()[k] = vs
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	for _, e := range geminiStream(req, reply, id) {
		b, err := json.Marshal(e)
		if err != nil {
			s.tb.Errorf("fakellm: encode stream event: %v", err)
			return
		}
		if _, err := fmt.Fprintf(w, "data: %s\r\n\r\n", b); err != nil {
			return // the client went away
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
}
