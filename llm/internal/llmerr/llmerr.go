// Package llmerr classifies model-provider failures into *conch.ModelError,
// the same way for every provider: HTTP status plus the provider's error code
// or message, Retry-After headers, and transport failures.
package llmerr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"conch"
)

// contextTooLongMarkers are lower-case fragments of the messages and codes
// providers use when a conversation no longer fits the context window.
var contextTooLongMarkers = []string{
	"context_length_exceeded",                   // OpenAI code
	"maximum context length",                    // OpenAI, vLLM, OpenRouter messages
	"context length exceeded",                   // llama.cpp, LM Studio
	"context window",                            // several compatible servers
	"prompt is too long",                        // Anthropic
	"prompt_too_long",                           // Anthropic error_code style
	"exceeds the maximum number of tokens",      // Gemini
	"input token count",                         // Gemini ("the input token count (N) exceeds …")
	"too many tokens",                           // Groq and others
	"reduce the length of the messages",         // OpenAI
	"string_above_max_length",                   // OpenAI code for an oversized message
	"request_too_large",                         // Anthropic 413 type
	"exceeds the model's maximum context",       // misc
	"tokens exceeds the maximum allowed tokens", // misc
}

// IsContextTooLong reports whether a provider's error code or message says the
// request does not fit the model's context window.
func IsContextTooLong(code, message string) bool {
	s := strings.ToLower(code + " " + message)
	for _, m := range contextTooLongMarkers {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// KindForStatus classifies an HTTP error answer.
func KindForStatus(status int, code, message string) conch.ErrorKind {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return conch.KindAuth
	case status == http.StatusRequestEntityTooLarge:
		return conch.KindContextTooLong
	case status == http.StatusTooManyRequests && code == "insufficient_quota":
		// OpenAI's "you exceeded your current quota": billing, not a rate
		// limit, so waiting does not help. The operator has to act.
		return conch.KindAuth
	case status == http.StatusRequestTimeout, status == http.StatusConflict,
		status == http.StatusTooManyRequests, status >= 500:
		return conch.KindTransient
	case status >= 400 && IsContextTooLong(code, message):
		return conch.KindContextTooLong
	case status >= 400:
		return conch.KindBadRequest
	}
	return conch.KindInternal
}

// HTTP builds the ModelError for an HTTP error answer. header may be nil;
// code is the provider's machine-readable code or type, message its text.
func HTTP(status int, header http.Header, code, message string, cause error) *conch.ModelError {
	return &conch.ModelError{
		Kind:       KindForStatus(status, code, message),
		Status:     status,
		RetryAfter: RetryAfter(header, time.Now()),
		Message:    message,
		Err:        cause,
	}
}

// RetryAfter reads how long the server asks us to wait: retry-after-ms
// (milliseconds, OpenAI and Azure), else Retry-After in seconds (possibly
// fractional) or as an HTTP date. It returns 0 when absent or unparsable.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && !math.IsInf(ms, 0) && ms < 1e12 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs <= 0 || math.IsNaN(secs) || math.IsInf(secs, 0) || secs > 1e9 {
			return 0
		}
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// ProtoDuration parses a google.protobuf.Duration in its JSON form ("30s",
// "1.5s"), as Gemini sends it in RetryInfo.retryDelay. It returns 0 when s is
// not such a duration.
func ProtoDuration(s string) time.Duration {
	num, ok := strings.CutSuffix(strings.TrimSpace(s), "s")
	if !ok {
		return 0
	}
	secs, err := strconv.ParseFloat(num, 64)
	if err != nil || secs <= 0 || math.IsInf(secs, 0) || secs > 1e9 {
		return 0
	}
	return time.Duration(secs * float64(time.Second))
}

// Transport classifies a failure that is not an HTTP error answer: a
// cancelled caller context comes back as an error wrapping ctx.Err() (never a
// ModelError, never transient); a timeout or a broken, refused or reset
// connection is a transient ModelError; anything else (an undecodable answer,
// a bad option) is an internal ModelError. timeout is the call's own limit,
// for the message.
//
// A timeout is reported without context.DeadlineExceeded in its chain, so
// errors.Is(err, context.DeadlineExceeded) stays true only for the caller's
// own deadline.
func Transport(ctx context.Context, timeout time.Duration, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if IsTimeout(err) {
		msg := "the request timed out"
		if timeout > 0 {
			msg = fmt.Sprintf("the request timed out after %s", timeout)
		}
		return &conch.ModelError{Kind: conch.KindTransient, Message: msg, Err: errors.New(msg)}
	}
	if IsConnection(err) {
		return &conch.ModelError{Kind: conch.KindTransient, Message: "connection failed: " + err.Error(), Err: err}
	}
	return &conch.ModelError{Kind: conch.KindInternal, Message: err.Error(), Err: err}
}

// IsTimeout reports whether err is a deadline or a network timeout.
func IsTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// IsConnection reports whether err means the connection failed: refused,
// reset, closed before or during the answer.
func IsConnection(err error) bool {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE),
		errors.Is(err, net.ErrClosed):
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return true
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true
	}
	// net/http reports some broken exchanges only as text.
	s := err.Error()
	return strings.Contains(s, "server closed") || strings.Contains(s, "connection reset") ||
		strings.Contains(s, "broken pipe") || strings.Contains(s, "EOF")
}

// InStream builds the ModelError for an error the server sent inside a
// stream that had begun with 200 OK (an Anthropic error event, an OpenAI
// error chunk, a Gemini error object). status is the HTTP status the
// provider answers that error with before a stream begins (529 for
// Anthropic's overloaded_error), so the error is classified and reported
// exactly as that answer would be; 0 when its type names none, which is
// taken for a server failure (transient) unless the text says the context is
// too long.
func InStream(status int, header http.Header, code, message string, cause error) *conch.ModelError {
	if status >= 400 && status <= 599 {
		return HTTP(status, header, code, message, cause)
	}
	kind := conch.KindTransient
	if IsContextTooLong(code, message) {
		kind = conch.KindContextTooLong
	}
	return &conch.ModelError{Kind: kind, RetryAfter: RetryAfter(header, time.Now()), Message: message, Err: cause}
}

// ErrTruncated is the cause of a stream that ended without its final event.
var ErrTruncated = fmt.Errorf("the stream ended before its final event: %w", io.ErrUnexpectedEOF)

// Truncated is the transient ModelError for a stream that ended without its
// final event (what names it, e.g. "message_stop"): the answer is partial,
// and asking again is the remedy.
func Truncated(what string) *conch.ModelError {
	msg := "the stream ended before its final event"
	if what != "" {
		msg += " (" + what + ")"
	}
	return &conch.ModelError{Kind: conch.KindTransient, Message: msg, Err: ErrTruncated}
}
