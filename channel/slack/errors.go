package slack

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/slack-go/slack"

	"conch"
	"conch/internal/backoff"
)

// apiError is an error answer of the Web API: Slack's error string, or the
// HTTP status when Slack answered without one, and the Retry-After of a
// 429. The few error strings we act on are matched here and nowhere else.
type apiError struct {
	Method     string
	Code       string // Slack's error ("channel_not_found"); "http_503" for a bare status
	Status     int
	RetryAfter time.Duration
}

func (e *apiError) Error() string {
	s := e.Method + ": " + e.Code
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	return s
}

// classify turns an error of slack-go into an *apiError where Slack
// answered; network errors pass through wrapped.
func classify(method string, err error) error {
	if err == nil {
		return nil
	}
	var rl *slack.RateLimitedError
	if errors.As(err, &rl) {
		return &apiError{Method: method, Code: "ratelimited", Status: http.StatusTooManyRequests, RetryAfter: rl.RetryAfter}
	}
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		return &apiError{Method: method, Code: se.Err, Status: http.StatusOK}
	}
	var sc slack.StatusCodeError
	if errors.As(err, &sc) {
		return &apiError{Method: method, Code: fmt.Sprintf("http_%d", sc.Code), Status: sc.Code}
	}
	return fmt.Errorf("%s: %w", method, err)
}

func codeOf(err error) string {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

// authCodes are the errors that mean the token is wrong or revoked.
var authCodes = map[string]bool{
	"invalid_auth": true, "not_authed": true, "account_inactive": true, "token_revoked": true,
	"token_expired": true, "not_allowed_token_type": true, "no_permission": true, "missing_scope": true,
}

// transientCodes are Slack's own "try again" errors.
var transientCodes = map[string]bool{
	"internal_error": true, "fatal_error": true, "service_unavailable": true, "request_timeout": true, "ratelimited": true,
}

func isAuth(err error) bool { return authCodes[codeOf(err)] }

// retryAfter is the wait a 429 asks for.
func retryAfter(err error) time.Duration {
	var ae *apiError
	if errors.As(err, &ae) && ae.RetryAfter > 0 {
		return ae.RetryAfter
	}
	return 0
}

// retryWait prepares err for backoff.Retry: a 429 waits Retry-After,
// Slack's transient errors, 5xx and network errors back off, other
// answers are permanent.
func retryWait(err error) error {
	if err == nil {
		return nil
	}
	if d := retryAfter(err); d > 0 {
		return backoff.After(err, d)
	}
	var ae *apiError
	if !errors.As(err, &ae) {
		return err // network
	}
	if transientCodes[ae.Code] || ae.Status >= 500 {
		return err
	}
	return backoff.Permanent(err)
}

// authError is what Run returns when Slack refuses a token.
func authError(err error, which string) error {
	return &conch.Error{Kind: conch.KindAuth, User: "Slack refused the " + which,
		Err: fmt.Errorf("slack: %w (check slack.%s)", err, which)}
}

// describe explains an error for /status and doctor.
func describe(err error) string {
	var ae *apiError
	if !errors.As(err, &ae) {
		return err.Error() + " (network: is Slack at slack.api_url reachable?)"
	}
	switch {
	case ae.Code == "ratelimited":
		return fmt.Sprintf("rate limited, Slack asked to wait %s", ae.RetryAfter)
	case ae.Code == "missing_scope":
		return ae.Error() + " (the app lacks a scope: reinstall it from docs/slack-app.yaml)"
	case isAuth(err):
		return ae.Error() + " (a token is wrong or revoked: copy it again from the app's settings)"
	case ae.Code == "not_in_channel" || ae.Code == "channel_not_found":
		return ae.Error() + " (invite the bot to the channel: /invite @conch)"
	case ae.Status >= 500:
		return ae.Error() + " (Slack server error, retrying)"
	}
	return ae.Error()
}
