package fakellm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// Streamed answers, common to the three protocols: an answer is cut into
// chunks (its text a word at a time unless Chunks says otherwise, then each
// tool call's arguments in a few pieces; Gemini sends each call whole, as one
// chunk), written as server-sent events and flushed one by one. A script can
// slow the chunks down (ChunkDelay) and end the stream early: with the
// provider's in-stream error event (FailAfter), by cutting the connection
// (CutAfter), or by ending it cleanly without its final events (EndAfter).

type stopKind int

const (
	stopNone stopKind = iota
	stopFail          // the provider's error event, then the end
	stopCut           // the connection closed mid-answer
	stopEnd           // a clean end without the final events
)

// Chunks streams the answer's text as exactly these pieces; the text becomes
// their concatenation.
func (r Reply) Chunks(pieces ...string) Reply {
	r.pieces = append([]string(nil), pieces...)
	r.text = strings.Join(pieces, "")
	return r
}

// ChunkDelay waits d before each chunk after the first.
func (r Reply) ChunkDelay(d time.Duration) Reply { r.chunkDelay = d; return r }

// FailAfter sends n chunks and then the provider's in-stream error event for
// e, an Error or ContextTooLong reply (OpenAI: a data chunk holding
// {"error": …}; Anthropic: event: error with e's error type, e.g.
// overloaded_error for 529; Gemini: a data event holding the error object
// with e's status as its code), and ends the stream.
func (r Reply) FailAfter(n int, e Reply) Reply {
	if !e.isError() || e.rawType != "" || e.rawBody != "" {
		r.err = fmt.Errorf("FailAfter wants an Error or ContextTooLong reply")
	}
	r.stop, r.stopAfter, r.streamErr = stopFail, max(n, 0), &e
	return r
}

// CutAfter sends n chunks and then closes the connection mid-answer, as a
// broken network does.
func (r Reply) CutAfter(n int) Reply { r.stop, r.stopAfter = stopCut, max(n, 0); return r }

// EndAfter sends n chunks and then ends the response cleanly, without the
// stream's final events (no finish reason, no message_stop, no [DONE]), as a
// proxy that gives up does.
func (r Reply) EndAfter(n int) Reply { r.stop, r.stopAfter = stopEnd, max(n, 0); return r }

// textChunks is the answer's text in streaming chunks.
func (r Reply) textChunks() []string {
	if r.pieces != nil {
		var out []string
		for _, p := range r.pieces {
			if p != "" {
				out = append(out, p)
			}
		}
		return out
	}
	return splitWords(r.text)
}

// splitWords cuts s after each run of spaces, keeping every byte: "hello
// world" is "hello ", "world".
func splitWords(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			out = append(out, s)
			break
		}
		for i < len(s) && s[i] == ' ' {
			i++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

// splitArgs cuts a tool call's JSON arguments into at most three pieces at
// rune boundaries, as the APIs stream them (pieces need not be valid JSON).
func splitArgs(args string) []string {
	const n = 3
	if len(args) < n {
		return []string{args}
	}
	var out []string
	size := len(args) / n
	for len(out) < n-1 {
		i := size
		for i < len(args) && !utf8.RuneStart(args[i]) {
			i++
		}
		if i >= len(args) {
			break
		}
		out = append(out, args[:i])
		args = args[i:]
	}
	return append(out, args)
}

// sse writes one streamed answer: events, flushes, the delay between chunks
// and the early end the script asks for.
type sse struct {
	s      *Server
	w      http.ResponseWriter
	r      *http.Request
	reply  Reply
	crlf   bool // Gemini separates events with CRLF CRLF
	chunks int  // content chunks sent so far
	buf    bytes.Buffer
}

func (s *Server) newSSE(w http.ResponseWriter, r *http.Request, reply Reply, crlf bool) *sse {
	for k, vs := range reply.header {
		w.Header()[k] = vs
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sse{s: s, w: w, r: r, reply: reply, crlf: crlf}
}

// event writes one event (name "" for a data-only event) and flushes it. It
// reports false when the client went away.
func (e *sse) event(name string, data any) bool {
	e.buf.Reset()
	if name != "" {
		e.buf.WriteString("event: " + name + "\n")
	}
	e.buf.WriteString("data: ")
	if raw, ok := data.(string); ok {
		e.buf.WriteString(raw)
	} else {
		enc := json.NewEncoder(&e.buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(data); err != nil {
			e.s.tb.Errorf("fakellm: encode stream event: %v", err)
			return false
		}
		e.buf.Truncate(e.buf.Len() - 1) // Encode's newline
	}
	if e.crlf {
		e.buf.WriteString("\r\n\r\n")
	} else {
		e.buf.WriteString("\n\n")
	}
	if _, err := e.w.Write(e.buf.Bytes()); err != nil {
		return false
	}
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
	return true
}

// chunk is called before each content chunk: it waits the chunk delay and
// reports whether the chunk is to be sent (false: the stream stops here, or
// the client went away; call finish).
func (e *sse) chunk() bool {
	if e.reply.stop != stopNone && e.chunks >= e.reply.stopAfter {
		return false
	}
	if e.chunks > 0 && e.reply.chunkDelay > 0 {
		t := time.NewTimer(e.reply.chunkDelay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-e.r.Context().Done():
			return false
		case <-e.s.closing:
			return false
		}
	}
	e.chunks++
	return true
}

// stopped is called when chunk said no and when the content is all sent:
// it reports whether the stream ends here, before its final events, and
// does what the script asks: an error event (written by fail), a cut
// connection, or nothing (a clean end). A script that stops after more
// chunks than there are stops before the final events.
func (e *sse) stopped(fail func(Reply)) bool {
	if e.r.Context().Err() != nil {
		return true
	}
	select {
	case <-e.s.closing:
		e.s.drop(e.w)
		return true
	default:
	}
	if e.reply.stop == stopNone {
		return false
	}
	switch e.reply.stop {
	case stopFail:
		fail(*e.reply.streamErr)
	case stopCut:
		e.s.drop(e.w)
	}
	return true
}
