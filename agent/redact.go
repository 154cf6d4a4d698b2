package agent

import (
	"cmp"
	"slices"
	"strings"
)

// Redacted replaces a configured secret in what tools return.
const Redacted = "[redacted]"

// MinSecretLen is the shortest secret redacted: a shorter one would mask
// ordinary words and is ignored.
const MinSecretLen = 8

// newRedactor returns a replacer of the secrets (longest first, so that a
// secret containing another is replaced whole), or nil when none is long
// enough.
func newRedactor(secrets []string) *strings.Replacer {
	var keep []string
	for _, s := range secrets {
		if len(s) >= MinSecretLen && !slices.Contains(keep, s) {
			keep = append(keep, s)
		}
	}
	if len(keep) == 0 {
		return nil
	}
	slices.SortFunc(keep, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	pairs := make([]string, 0, 2*len(keep))
	for _, s := range keep {
		pairs = append(pairs, s, Redacted)
	}
	return strings.NewReplacer(pairs...)
}

// redact replaces the configured secrets in s.
func (a *Agent) redact(s string) string {
	if a.redactor == nil {
		return s
	}
	return a.redactor.Replace(s)
}

// redactedError is a tool's error with the secrets taken out of its text;
// errors.Is and errors.As still see the original.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

func (a *Agent) redactErr(err error) error {
	if err == nil || a.redactor == nil {
		return err
	}
	if msg := a.redact(err.Error()); msg != err.Error() {
		return &redactedError{msg: msg, err: err}
	}
	return err
}

// RedactFunc returns a func that replaces secrets in a text as the agent
// does in tool results (the same rules as Options.Secrets), for the other
// ways a sandbox's output leaves conch (its MCP server).
func RedactFunc(secrets []string) func(string) string {
	r := newRedactor(secrets)
	if r == nil {
		return func(s string) string { return s }
	}
	return r.Replace
}
