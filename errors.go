package conch

import (
	"errors"
	"fmt"
	"time"
)

// ErrorKind classifies failures so callers can branch without string matching.
type ErrorKind string

// Error kinds.
const (
	// KindTransient failures may succeed when retried: 429, 5xx, timeouts, resets.
	KindTransient ErrorKind = "transient"
	// KindAuth: credentials are missing or refused. Not retried.
	KindAuth ErrorKind = "auth"
	// KindBadRequest: the request itself is wrong. Not retried.
	KindBadRequest ErrorKind = "bad_request"
	// KindContextTooLong: the conversation no longer fits the model's context.
	KindContextTooLong ErrorKind = "context_too_long"
	// KindInvalid: bad input from a person or a config file.
	KindInvalid ErrorKind = "invalid"
	// KindNotFound: the thing asked for does not exist.
	KindNotFound ErrorKind = "not_found"
	// KindUnavailable: a dependency (engine, homeserver) cannot be reached.
	KindUnavailable ErrorKind = "unavailable"
	// KindInternal: anything else.
	KindInternal ErrorKind = "internal"
)

// ModelError is how a Model reports a failed call.
type ModelError struct {
	Kind ErrorKind
	// Status is the HTTP status, 0 when the call never got an answer.
	Status int
	// RetryAfter is the server's Retry-After, 0 when absent.
	RetryAfter time.Duration
	// Message is the provider's error text (may contain detail not meant for users).
	Message string
	Err     error
}

func (e *ModelError) Error() string {
	s := fmt.Sprintf("model %s", e.Kind)
	if e.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Err != nil && e.Message == "" {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *ModelError) Unwrap() error { return e.Err }

// ErrStoreFull is wrapped by the store's errors when its disk (or the file
// system's quota) is full: the write may succeed once space is freed, so a
// turn waits and tries again rather than failing.
var ErrStoreFull = errors.New("the store's disk is full")

// Error is a failure with a kind and a message that is safe to show to a person.
// Detail for logs stays in Err.
type Error struct {
	Kind ErrorKind
	// User is short, user-safe text. Empty means "use a generic message".
	User string
	Err  error
}

func (e *Error) Error() string {
	switch {
	case e.Err != nil && e.User != "":
		return e.User + ": " + e.Err.Error()
	case e.Err != nil:
		return e.Err.Error()
	}
	return e.User
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error of the given kind whose user text is the formatted message.
func Errorf(kind ErrorKind, format string, args ...any) error {
	return &Error{Kind: kind, User: fmt.Sprintf(format, args...)}
}

// KindOf returns the kind of err: from an *Error or *ModelError in its chain,
// else KindInternal. A nil error has no kind.
func KindOf(err error) ErrorKind {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	var me *ModelError
	if errors.As(err, &me) {
		return me.Kind
	}
	return KindInternal
}

// UserMessage returns text about err that is safe to show to a person.
func UserMessage(err error) string {
	var e *Error
	if errors.As(err, &e) && e.User != "" {
		return e.User
	}
	var me *ModelError
	if errors.As(err, &me) {
		switch me.Kind {
		case KindAuth:
			return "The model provider refused our credentials. The operator needs to check the API key."
		case KindContextTooLong:
			return "This conversation has grown too long for the model. Send /reset to start afresh."
		case KindBadRequest:
			return "The model provider rejected the request."
		case KindTransient:
			return "The model provider is unavailable right now. Please try again in a moment."
		}
	}
	return "Something went wrong on our side; it has been logged."
}
