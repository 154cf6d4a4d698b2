package fakellm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Reply is one scripted answer. Build it with Text, ToolCall, ToolCalls,
// Error, ContextTooLong, Raw, Drop or Hang and refine it with the methods
// (Chunks, ChunkDelay, FailAfter, CutAfter and EndAfter shape a streamed
// answer; a non-streaming request gets the whole answer), which return a
// modified copy (a Reply is a value; sharing one between goroutines is
// safe).
type Reply struct {
	text      string
	calls     []Call
	maxTokens bool
	usage     *[2]int
	cached    int

	status     int
	errMsg     string
	errCode    string
	tooLong    bool
	rawType    string
	rawBody    string
	retryAfter time.Duration
	header     http.Header

	delay time.Duration
	hang  bool
	drop  bool

	// Streaming only (stream.go).
	pieces     []string      // the text's chunks; nil: one chunk a word
	chunkDelay time.Duration // between chunks
	stop       stopKind      // how the stream ends early, if it does
	stopAfter  int           // after this many chunks
	streamErr  *Reply        // the error event of stopFail

	err error // a construction mistake, answered as a 500 naming it
}

// Text is a plain text answer that ends the turn.
func Text(s string) Reply { return Reply{text: s} }

// ToolCall is an answer asking for one tool call. argsJSON must be a JSON
// object ("" means {}).
func ToolCall(name, argsJSON string) Reply {
	return ToolCalls(Call{Name: name, Args: json.RawMessage(argsJSON)})
}

// ToolCalls is an answer asking for several tool calls at once. A call
// without an ID gets one in the provider's style (Gemini calls carry none,
// as in the real API).
func ToolCalls(calls ...Call) Reply {
	r := Reply{calls: make([]Call, len(calls))}
	copy(r.calls, calls)
	for i, c := range r.calls {
		if len(c.Args) == 0 {
			r.calls[i].Args = json.RawMessage("{}")
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(c.Args, &obj); err != nil || obj == nil {
			r.err = fmt.Errorf("tool call %q: arguments %q are not a JSON object", c.Name, c.Args)
		}
	}
	return r
}

// Error is an HTTP error answer in the provider's error format. The
// provider's error type/code is derived from status (429 → rate limit,
// 401 → authentication, 5xx → server error, …); override it with Code.
func Error(status int, msg string) Reply {
	r := Reply{status: status, errMsg: msg}
	if status < 400 || status > 599 {
		r.err = fmt.Errorf("error status %d is not an HTTP error status", status)
	}
	return r
}

// ContextTooLong is the provider's own "the prompt does not fit the context
// window" error, with its real status, code and wording.
func ContextTooLong() Reply { return Reply{status: http.StatusBadRequest, tooLong: true} }

// Raw answers status with body verbatim, as a misbehaving proxy would (an
// HTML 502 page, a non-JSON error).
func Raw(status int, contentType, body string) Reply {
	return Reply{status: status, rawType: contentType, rawBody: body}
}

// Drop reads the request and then closes the connection without answering.
func Drop() Reply { return Reply{drop: true} }

// Hang never answers: it waits until the client gives up (its context is
// cancelled or it times out) or the server closes.
func Hang() Reply { return Reply{hang: true} }

// Text sets the answer's text; with tool calls, the text comes first.
func (r Reply) Text(s string) Reply { r.text = s; return r }

// MaxTokens marks the answer as cut off by the output token limit.
func (r Reply) MaxTokens() Reply { r.maxTokens = true; return r }

// Usage sets the reported token counts. By default input tokens are the
// request body's length / 4 and output tokens the answer's length / 4, at
// least 1.
func (r Reply) Usage(input, output int) Reply { r.usage = &[2]int{input, output}; return r }

// Cached sets how many of the input tokens the answer reports as read from
// the provider's prompt cache, each in its API's form: OpenAI's
// prompt_tokens_details.cached_tokens, Anthropic's cache_read_input_tokens
// (its input_tokens then counts only the rest), Gemini's
// cachedContentTokenCount.
func (r Reply) Cached(n int) Reply { r.cached = n; return r }

// Code overrides the provider error code of an Error reply: OpenAI's
// error.code, Anthropic's error.type, Gemini's error.status.
func (r Reply) Code(code string) Reply { r.errCode = code; return r }

// RetryAfter adds a Retry-After header in whole seconds, rounded up (and for
// Gemini, the RetryInfo detail the real API sends).
func (r Reply) RetryAfter(d time.Duration) Reply { r.retryAfter = d; return r }

// Header adds a response header (e.g. "retry-after-ms").
func (r Reply) Header(key, value string) Reply {
	h := r.header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Add(key, value)
	r.header = h
	return r
}

// Delay waits d before answering; if the client goes away first, nothing is
// sent.
func (r Reply) Delay(d time.Duration) Reply { r.delay = d; return r }

func (r Reply) isError() bool { return r.status != 0 }

// usageFor returns the token counts to report for an answer to body.
func (r Reply) usageFor(body []byte) (in, out int) {
	if r.usage != nil {
		return r.usage[0], r.usage[1]
	}
	n := len(r.text)
	for _, c := range r.calls {
		n += len(c.Name) + len(c.Args)
	}
	return max(1, len(body)/4), max(1, n/4)
}
