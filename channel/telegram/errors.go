package telegram

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-telegram/bot"

	"conch/internal/backoff"
)

// apiError is an error answer of the Bot API: its HTTP code, description
// and the retry_after of a 429. Telegram has no finer error codes than the
// description, so the few cases we act on (entity parsing, "not modified")
// are recognised by it here and nowhere else.
type apiError struct {
	Method      string
	Code        int
	Description string
	RetryAfter  int
}

func (e *apiError) Error() string {
	s := fmt.Sprintf("%s: %d %s", e.Method, e.Code, e.Description)
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(" (retry after %d s)", e.RetryAfter)
	}
	return s
}

// classify turns an error of the library into an *apiError where the
// server answered; network and decoding errors pass through.
func classify(method string, err error) error {
	if err == nil {
		return nil
	}
	var tm *bot.TooManyRequestsError
	if errors.As(err, &tm) {
		return &apiError{Method: method, Code: 429, Description: strings.TrimPrefix(tm.Message, "too many requests, "), RetryAfter: tm.RetryAfter}
	}
	var mig *bot.MigrateError
	if errors.As(err, &mig) {
		return &apiError{Method: method, Code: 400, Description: mig.Message}
	}
	for _, k := range []struct {
		err  error
		code int
	}{
		{bot.ErrorBadRequest, 400}, {bot.ErrorUnauthorized, 401}, {bot.ErrorForbidden, 403},
		{bot.ErrorNotFound, 404}, {bot.ErrorConflict, 409},
	} {
		if errors.Is(err, k.err) {
			desc := err.Error()
			if _, d, ok := strings.Cut(desc, ", "); ok {
				desc = d
			}
			return &apiError{Method: method, Code: k.code, Description: desc}
		}
	}
	// "error response from telegram for method X, 502 Bad Gateway"
	var code int
	var rest string
	if i := strings.Index(err.Error(), "error response from telegram for method "); i >= 0 {
		tail := err.Error()[i:]
		if j := strings.Index(tail, ", "); j >= 0 {
			if n, _ := fmt.Sscanf(tail[j+2:], "%d", &code); n == 1 {
				rest = strings.TrimSpace(strings.TrimPrefix(tail[j+2:], fmt.Sprint(code)))
				return &apiError{Method: method, Code: code, Description: rest}
			}
		}
	}
	return fmt.Errorf("%s: %w", method, err)
}

func codeOf(err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return 0
}

// isAuth: the token is wrong (401) or the bot does not exist (404 on getMe).
func isAuth(err error) bool {
	c := codeOf(err)
	return c == 401 || c == 404
}

// isEntityError: Telegram could not parse our HTML.
func isEntityError(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Code == 400 && strings.Contains(strings.ToLower(ae.Description), "can't parse entities")
}

// isNotModified: an edit with the text the message already has.
func isNotModified(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Code == 400 && strings.Contains(ae.Description, "message is not modified")
}

// retryAfter is the wait a 429 asks for.
func retryAfter(err error) time.Duration {
	var ae *apiError
	if errors.As(err, &ae) && ae.Code == 429 && ae.RetryAfter > 0 {
		return time.Duration(ae.RetryAfter) * time.Second
	}
	return 0
}

// retryWait prepares err for backoff.Retry: a 429 waits retry_after, other
// 4xx answers are permanent, 5xx and network errors are retried.
func retryWait(err error) error {
	if err == nil {
		return nil
	}
	if d := retryAfter(err); d > 0 {
		return backoff.After(err, d)
	}
	if c := codeOf(err); c >= 400 && c < 500 && c != 409 && c != 429 {
		return backoff.Permanent(err)
	}
	return err
}

func backoffPermanent(err error) error { return backoff.Permanent(err) }

// describe explains an error for /status and doctor.
func describe(err error) string {
	var ae *apiError
	if !errors.As(err, &ae) {
		return err.Error() + " (network: is the Bot API at telegram.api_url reachable?)"
	}
	switch {
	case ae.Code == 409 && strings.Contains(ae.Description, "webhook"):
		return ae.Description + " (a webhook is set for this bot: delete it, e.g. curl https://api.telegram.org/bot<token>/deleteWebhook)"
	case ae.Code == 409:
		return ae.Description + " (another process polls this bot token: stop it)"
	case ae.Code == 429:
		return fmt.Sprintf("rate limited, Telegram asked to wait %d s", ae.RetryAfter)
	case ae.Code == 401:
		return ae.Description + " (telegram.bot_token is wrong or revoked: get it from BotFather)"
	case ae.Code >= 500:
		return fmt.Sprintf("Telegram server error %d %s (retrying)", ae.Code, ae.Description)
	}
	return ae.Error()
}
