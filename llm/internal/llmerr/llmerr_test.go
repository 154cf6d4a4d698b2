package llmerr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	"conch"
)

func TestKindForStatus(t *testing.T) {
	tests := []struct {
		status        int
		code, message string
		want          conch.ErrorKind
	}{
		{401, "", "bad key", conch.KindAuth},
		{403, "permission_error", "", conch.KindAuth},
		{429, "rate_limit_exceeded", "", conch.KindTransient},
		{429, "insufficient_quota", "You exceeded your current quota", conch.KindAuth},
		{408, "", "", conch.KindTransient},
		{409, "", "", conch.KindTransient},
		{500, "", "", conch.KindTransient},
		{529, "overloaded_error", "", conch.KindTransient},
		{413, "request_too_large", "", conch.KindContextTooLong},
		{400, "context_length_exceeded", "", conch.KindContextTooLong},
		{400, "invalid_request_error", "prompt is too long: 208732 tokens > 200000 maximum", conch.KindContextTooLong},
		{400, "INVALID_ARGUMENT", "The input token count (1196265) exceeds the maximum number of tokens allowed (1048576).", conch.KindContextTooLong},
		{400, "", "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens", conch.KindContextTooLong},
		{400, "invalid_request_error", "tools.0: name is bad", conch.KindBadRequest},
		{404, "", "model not found", conch.KindBadRequest},
		{422, "", "", conch.KindBadRequest},
		{200, "", "", conch.KindInternal},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%d_%s", tc.status, tc.code), func(t *testing.T) {
			if got := KindForStatus(tc.status, tc.code, tc.message); got != tc.want {
				t.Errorf("KindForStatus(%d, %q, %q): got %q, want %q", tc.status, tc.code, tc.message, got, tc.want)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header http.Header
		want   time.Duration
	}{
		{"none", http.Header{}, 0},
		{"nil", nil, 0},
		{"seconds", http.Header{"Retry-After": {"3"}}, 3 * time.Second},
		{"fractional seconds", http.Header{"Retry-After": {"0.25"}}, 250 * time.Millisecond},
		{"milliseconds win", http.Header{"Retry-After-Ms": {"1500"}, "Retry-After": {"2"}}, 1500 * time.Millisecond},
		{"bad milliseconds fall back", http.Header{"Retry-After-Ms": {"soon"}, "Retry-After": {"2"}}, 2 * time.Second},
		{"http date", http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}, 90 * time.Second},
		{"past date", http.Header{"Retry-After": {now.Add(-time.Hour).Format(http.TimeFormat)}}, 0},
		{"zero", http.Header{"Retry-After": {"0"}}, 0},
		{"negative", http.Header{"Retry-After": {"-5"}}, 0},
		{"garbage", http.Header{"Retry-After": {"later"}}, 0},
		{"huge", http.Header{"Retry-After": {"1e300"}}, 0},
		{"NaN", http.Header{"Retry-After": {"NaN"}}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := RetryAfter(tc.header, now); got != tc.want {
				t.Errorf("RetryAfter(%v): got %v, want %v", tc.header, got, tc.want)
			}
		})
	}
}

func TestProtoDuration(t *testing.T) {
	tests := map[string]time.Duration{
		"30s": 30 * time.Second, "1.5s": 1500 * time.Millisecond, "0s": 0, "": 0, "30": 0, "abc s": 0, "-1s": 0,
	}
	for in, want := range tests {
		if got := ProtoDuration(in); got != want {
			t.Errorf("ProtoDuration(%q): got %v, want %v", in, got, want)
		}
	}
}

func TestTransport(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		kind conch.ErrorKind // "" means: a plain context error, not a ModelError
	}{
		{"caller cancelled", cancelled, context.Canceled, ""},
		{"own timeout", context.Background(), fmt.Errorf("post: %w", context.DeadlineExceeded), conch.KindTransient},
		{"net timeout", context.Background(), &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, conch.KindTransient},
		{"refused", context.Background(), &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, conch.KindTransient},
		{"reset", context.Background(), fmt.Errorf("read: %w", syscall.ECONNRESET), conch.KindTransient},
		{"eof", context.Background(), fmt.Errorf(`Post "http://x": %w`, io.EOF), conch.KindTransient},
		{"unexpected eof", context.Background(), io.ErrUnexpectedEOF, conch.KindTransient},
		{"decode", context.Background(), errors.New("invalid character 'x' looking for beginning of value"), conch.KindInternal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Transport(tc.ctx, time.Second, tc.err)
			var me *conch.ModelError
			isME := errors.As(err, &me)
			if tc.kind == "" {
				if isME || !errors.Is(err, context.Canceled) {
					t.Fatalf("got %v, want the context error itself", err)
				}
				return
			}
			if !isME || me.Kind != tc.kind {
				t.Fatalf("got %v, want a %q ModelError", err, tc.kind)
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("a timeout ModelError wraps context.DeadlineExceeded")
			}
		})
	}
}

func TestIsContextTooLong(t *testing.T) {
	for _, tc := range []struct {
		code, msg string
		want      bool
	}{
		{"context_length_exceeded", "", true},
		{"", "Prompt is too long", true},
		{"", "Please reduce the length of the messages.", true},
		{"", "invalid tool schema", false},
		{"rate_limit_exceeded", "", false},
	} {
		if got := IsContextTooLong(tc.code, tc.msg); got != tc.want {
			t.Errorf("IsContextTooLong(%q, %q): got %v, want %v", tc.code, tc.msg, got, tc.want)
		}
	}
}
