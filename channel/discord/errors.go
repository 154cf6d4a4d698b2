package discord

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/bwmarrin/discordgo"

	"conch"
	"conch/internal/backoff"
)

// apiError is an error answer of the REST API: the HTTP status, Discord's
// JSON error code and message, and the retry_after of a 429.
type apiError struct {
	Op         string
	Status     int
	Code       int
	Message    string
	RetryAfter time.Duration
}

func (e *apiError) Error() string {
	s := fmt.Sprintf("%s: %d", e.Op, e.Status)
	if e.Code != 0 {
		s += fmt.Sprintf(" (code %d)", e.Code)
	}
	if e.Message != "" {
		s += " " + e.Message
	}
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	return s
}

// classify turns an error of discordgo into an *apiError where Discord
// answered; network errors pass through wrapped.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	var rl *discordgo.RateLimitError
	if errors.As(err, &rl) && rl.RateLimit != nil && rl.TooManyRequests != nil {
		return &apiError{Op: op, Status: http.StatusTooManyRequests, Message: rl.Message, RetryAfter: rl.RetryAfter}
	}
	var re *discordgo.RESTError
	if errors.As(err, &re) && re.Response != nil {
		ae := &apiError{Op: op, Status: re.Response.StatusCode}
		if re.Message != nil {
			ae.Code, ae.Message = re.Message.Code, re.Message.Message
		}
		return ae
	}
	return fmt.Errorf("%s: %w", op, err)
}

func statusOf(err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

func retryAfter(err error) time.Duration {
	var ae *apiError
	if errors.As(err, &ae) && ae.RetryAfter > 0 {
		return ae.RetryAfter
	}
	return 0
}

// retryWait prepares err for backoff.Retry: a 429 waits retry_after, 5xx
// and network errors back off, other answers are permanent.
func retryWait(err error) error {
	if err == nil {
		return nil
	}
	if d := retryAfter(err); d > 0 {
		return backoff.After(err, d)
	}
	if s := statusOf(err); s >= 400 && s < 500 {
		return backoff.Permanent(err)
	}
	return err
}

func authError(err error) error {
	return &conch.Error{Kind: conch.KindAuth, User: "Discord refused the bot token",
		Err: fmt.Errorf("discord: %w (check discord.bot_token: Developer Portal → Bot → Reset Token)", err)}
}

// describe explains an error for /status and doctor.
func describe(err error) string {
	var ae *apiError
	if !errors.As(err, &ae) {
		return err.Error() + " (network: is Discord reachable?)"
	}
	switch {
	case ae.Status == http.StatusTooManyRequests:
		return fmt.Sprintf("rate limited, Discord asked to wait %s", ae.RetryAfter)
	case ae.Status == http.StatusUnauthorized:
		return ae.Error() + " (discord.bot_token is wrong or was reset)"
	case ae.Status == http.StatusForbidden:
		return ae.Error() + " (the bot lacks a permission in that channel: View Channel, Send Messages, Read Message History, Attach Files)"
	case ae.Status >= 500:
		return ae.Error() + " (Discord server error, retrying)"
	}
	return ae.Error()
}
