// Package fakellm is a wire-exact fake of the model APIs conch's providers
// and the coding-agent CLIs call: OpenAI Chat Completions, the OpenAI
// Responses API (Codex; responses.go), Anthropic Messages and Gemini
// generateContent. It listens on 127.0.0.1, answers from a
// per-test script and records every request in a provider-neutral form.
//
//	s := fakellm.New(t)
//	s.Push(fakellm.ToolCall("bash", `{"cmd":"ls"}`), fakellm.Text("done"))
//	m, _ := openai.New(openai.Config{BaseURL: s.BaseURL(fakellm.OpenAI), APIKey: "k", Model: "gpt-test"})
//	… run the code under test …
//	got := s.Requests()[1].ToolResults()
//
// Replies are taken in order from the script; when it is empty the handler set
// with Handle answers; when there is neither, the server answers 500 naming
// the problem and marks the test failed. The response shapes (ids, finish
// reasons, usage, tool calls) are the real APIs' shapes, so the SDKs parse
// them exactly as they parse production traffic. Streaming is spoken as
// the APIs speak it, in server-sent events (stream.go): OpenAI
// "stream": true (with stream_options.include_usage, the final usage chunk)
// ending in data: [DONE]; Anthropic "stream": true (message_start,
// content_block_start/delta/stop, ping, message_delta, message_stop, error);
// Gemini streamGenerateContent?alt=sse (what the Gemini CLI calls; its JSON
// array form without alt=sse gets a 400). TLS serves it over HTTPS.
package fakellm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Server is a running fake. All methods are safe for concurrent use.
type Server struct {
	tb           testing.TB
	srv          *httptest.Server
	closing      chan struct{}
	closeOnce    sync.Once
	record       bool
	exhaustionOK bool
	tls          bool
	seq          atomic.Uint64
	bufs         sync.Pool // encoding buffers: the fake is on the hot path of gateway benchmarks

	mu       sync.Mutex
	script   []Reply
	handler  func(Request) Reply
	requests []Request
	count    int
	changed  chan struct{} // closed and replaced whenever count grows

	transcriber    func(Transcription) (string, error)
	transcriptions []Transcription
	models         models // the model-list endpoints (models.go)
}

// Option configures a Server.
type Option func(*Server)

// WithoutRecording keeps no Requests (Count and Wait still work): for
// benchmarks that send many requests.
func WithoutRecording() Option { return func(s *Server) { s.record = false } }

// ExhaustionOK makes an exhausted script answer its 500 without failing the
// test, for tests of exactly that.
func ExhaustionOK() Option { return func(s *Server) { s.exhaustionOK = true } }

// New starts a server on 127.0.0.1 and closes it when the test ends.
func New(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	s := &Server{tb: tb, closing: make(chan struct{}), record: true, changed: make(chan struct{})}
	for _, o := range opts {
		o(s)
	}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serveHTTP))
	if s.tls {
		s.srv.StartTLS()
	} else {
		s.srv.Start()
	}
	tb.Cleanup(func() {
		if n := s.Pending(); n > 0 {
			tb.Logf("fakellm: %d scripted replies were never requested", n)
		}
		s.Close()
	})
	return s
}

// URL is the server's root URL, e.g. "http://127.0.0.1:41234".
func (s *Server) URL() string { return s.srv.URL }

// BaseURL is the base URL to configure a provider's SDK with: URL()+"/v1" for
// OpenAI (its SDK appends "chat/completions"), URL() for Anthropic (its SDK
// appends "v1/messages") and Gemini (its SDK appends
// "v1beta/models/{model}:generateContent").
func (s *Server) BaseURL(p Provider) string {
	if p == OpenAI || p == Responses {
		return s.srv.URL + "/v1"
	}
	return s.srv.URL
}

// Close stops the server, ending any delayed or hanging answers. It is
// called automatically when the test ends.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.srv.Close()
	})
}

// Push appends replies to the script.
func (s *Server) Push(replies ...Reply) {
	s.mu.Lock()
	s.script = append(s.script, replies...)
	s.mu.Unlock()
}

// Handle sets the function that answers once the script is empty, given the
// decoded request. It may be called concurrently and must not block for
// long. nil removes it.
func (s *Server) Handle(f func(Request) Reply) {
	s.mu.Lock()
	s.handler = f
	s.mu.Unlock()
}

// Pending returns how many scripted replies are still waiting.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.script)
}

// Requests returns a copy of the requests received so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Last returns the latest request and whether there was one.
func (s *Server) Last() (Request, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) == 0 {
		return Request{}, false
	}
	return s.requests[len(s.requests)-1], true
}

// Count returns how many model requests arrived (recorded or not).
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count
}

// Wait blocks until at least n model requests have arrived or ctx ends.
func (s *Server) Wait(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		got, ch := s.count, s.changed
		s.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("fakellm: wait for %d requests (got %d): %w", n, got, ctx.Err())
		}
	}
}

func (s *Server) nextID() uint64 { return s.seq.Add(1) }

// route maps a request to its provider and, for Gemini, the model in the path.
func route(r *http.Request) (p Provider, model string, stream, ok bool) {
	if r.Method != http.MethodPost {
		return "", "", false, false
	}
	switch path := r.URL.Path; {
	case path == "/v1/chat/completions":
		return OpenAI, "", false, true
	case path == "/v1/responses":
		return Responses, "", false, true
	case path == "/v1/messages":
		return Anthropic, "", false, true
	case strings.HasPrefix(path, "/v1beta/models/") || strings.HasPrefix(path, "/v1/models/"):
		rest := path[strings.Index(path, "/models/")+len("/models/"):]
		m, method, found := strings.Cut(rest, ":")
		switch {
		case !found || m == "":
			return "", "", false, false
		case method == "generateContent":
			return Gemini, m, false, true
		case method == "streamGenerateContent":
			return Gemini, m, true, true
		}
	}
	return "", "", false, false
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/audio/transcriptions" {
		s.serveTranscription(w, r)
		return
	}
	if s.serveModels(w, r) {
		return
	}
	p, model, stream, ok := route(r)
	if !ok {
		s.writeJSON(w, http.StatusNotFound, nil, map[string]any{"error": map[string]any{
			"message": fmt.Sprintf("fakellm: no endpoint %s %s; it serves POST /v1/chat/completions, POST /v1/responses, POST /v1/messages and POST /v1beta/models/{model}:generateContent", r.Method, r.URL.Path),
			"type":    "not_found_error", "code": 404, "status": "NOT_FOUND",
		}})
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the client went away
	}
	req := Request{Provider: p, Path: r.URL.Path, Model: model, Header: r.Header.Clone(), Body: body}
	switch p {
	case OpenAI:
		req.APIKey = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		stream, err = decodeOpenAI(body, &req)
	case Responses:
		req.APIKey = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		stream, err = decodeResponses(body, &req)
	case Anthropic:
		// The v2 SDK sends the key as a bearer token; the API takes both.
		req.APIKey = r.Header.Get("X-Api-Key")
		if req.APIKey == "" {
			req.APIKey = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		}
		stream, err = decodeAnthropic(body, &req)
	case Gemini:
		req.APIKey = r.Header.Get("X-Goog-Api-Key")
		if req.APIKey == "" {
			req.APIKey = r.URL.Query().Get("key")
		}
		err = decodeGemini(body, &req)
	}
	if me := (*mediaError)(nil); errors.As(err, &me) {
		// Refused media: the API's own 400 and words; the request is
		// recorded (a test asserts on it) and takes no scripted reply.
		s.mu.Lock()
		if s.record {
			s.requests = append(s.requests, req)
		}
		s.mu.Unlock()
		s.writeError(w, &req, Error(http.StatusBadRequest, me.msg).Code(me.code))
		return
	}
	if err != nil {
		s.writeError(w, &req, Error(http.StatusBadRequest, "fakellm: cannot decode the request: "+err.Error()))
		return
	}
	if stream && p == Gemini && !geminiSSE(r) {
		s.writeError(w, &req, Error(http.StatusBadRequest, "fakellm: Gemini streaming is spoken only as server-sent events (streamGenerateContent?alt=sse)"))
		return
	}
	req.Stream = stream

	reply, n, found := s.take(req)
	if !found {
		msg := fmt.Sprintf("fakellm: script exhausted: %s request %d (%s) has no scripted reply; Push more replies or set Handle", p, n, r.URL.Path)
		if !s.exhaustionOK {
			s.tb.Errorf("%s", msg)
		}
		reply = Error(http.StatusInternalServerError, msg)
	}
	if reply.err != nil {
		s.tb.Errorf("fakellm: bad scripted reply: %v", reply.err)
		reply = Error(http.StatusInternalServerError, "fakellm: bad scripted reply: "+reply.err.Error())
	}
	s.answer(w, r, &req, reply)
}

// take records req and returns the reply for it and the request's number.
func (s *Server) take(req Request) (reply Reply, n int, found bool) {
	s.mu.Lock()
	if s.record {
		s.requests = append(s.requests, req)
	}
	s.count++
	n = s.count
	close(s.changed)
	s.changed = make(chan struct{})
	popped := len(s.script) > 0
	if popped {
		reply = s.script[0]
		s.script[0] = Reply{}
		s.script = s.script[1:]
	}
	h := s.handler
	s.mu.Unlock()
	switch {
	case popped:
		return reply, n, true
	case h != nil:
		return h(req), n, true
	}
	return Reply{}, n, false
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request, req *Request, reply Reply) {
	if reply.hang || reply.delay > 0 {
		var timeout <-chan time.Time
		if !reply.hang {
			t := time.NewTimer(reply.delay)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-timeout:
		case <-r.Context().Done():
			return // the client went away; nobody reads an answer
		case <-s.closing:
			s.drop(w) // returning would send an empty 200
			return
		}
	}
	if reply.drop {
		s.drop(w)
		return
	}
	if reply.isError() {
		s.writeError(w, req, reply)
		return
	}
	id := s.nextID()
	switch req.Provider {
	case OpenAI:
		if req.Stream {
			s.writeOpenAIStream(w, r, req, reply, id)
			return
		}
		s.writeJSON(w, http.StatusOK, reply.header, openAIResponse(req, reply, id))
	case Responses:
		if req.Stream {
			s.writeResponsesStream(w, r, req, reply, id)
			return
		}
		s.writeJSON(w, http.StatusOK, reply.header, responsesResponse(req, reply, id))
	case Anthropic:
		if req.Stream {
			s.writeAnthropicStream(w, r, req, reply, id)
			return
		}
		s.writeJSON(w, http.StatusOK, reply.header, anthropicResponse(req, reply, id))
	case Gemini:
		if req.Stream {
			s.writeGeminiStream(w, r, req, reply, id)
			return
		}
		s.writeJSON(w, http.StatusOK, reply.header, geminiResponse(req, reply, id))
	}
}

// drop closes the connection without an answer.
func (s *Server) drop(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		s.tb.Errorf("fakellm: cannot drop the connection: the response writer cannot be hijacked")
		return
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		s.tb.Errorf("fakellm: hijack to drop the connection: %v", err)
		return
	}
	_ = conn.Close()
}

func (s *Server) writeError(w http.ResponseWriter, req *Request, reply Reply) {
	h := reply.header.Clone()
	if h == nil {
		h = http.Header{}
	}
	if reply.retryAfter > 0 && req.Provider != Gemini {
		secs := int64((reply.retryAfter + time.Second - 1) / time.Second)
		h.Set("Retry-After", fmt.Sprint(secs))
	}
	if reply.rawType != "" || reply.rawBody != "" {
		for k, vs := range h {
			w.Header()[k] = vs
		}
		w.Header().Set("Content-Type", reply.rawType)
		w.WriteHeader(reply.status)
		_, _ = io.WriteString(w, reply.rawBody)
		return
	}
	id := s.nextID()
	switch req.Provider {
	case OpenAI, Responses:
		h.Set("X-Request-Id", fmt.Sprintf("req_fake%d", id))
		s.writeJSON(w, reply.status, h, openAIError(reply))
	case Anthropic:
		h.Set("Request-Id", fmt.Sprintf("req_fake%d", id))
		s.writeJSON(w, reply.status, h, anthropicError(reply, id))
	case Gemini:
		s.writeJSON(w, reply.status, h, geminiError(reply))
	}
}

func (s *Server) writeJSON(w http.ResponseWriter, status int, header http.Header, v any) {
	buf, _ := s.bufs.Get().(*bytes.Buffer)
	if buf == nil {
		buf = new(bytes.Buffer)
	}
	defer func() { buf.Reset(); s.bufs.Put(buf) }()
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		http.Error(w, "fakellm: encode response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	for k, vs := range header {
		w.Header()[k] = vs
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
