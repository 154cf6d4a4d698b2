package agent

import (
	"encoding/json"
	"strings"

	"conch"
)

// The details of recorded steps (conch.Step.Detail), one type per kind.

// ModelCallDetail is a StepModelCall.
type ModelCallDetail struct {
	// Model is the model the API says answered; Via the configured model
	// ("provider/name") the call went to, Fallback set when it was not the
	// primary.
	Model        string `json:"model"`
	Via          string `json:"via,omitempty"`
	Fallback     bool   `json:"fallback,omitempty"`
	DurationMS   int64  `json:"duration_ms"`
	InputTokens  int    `json:"input_tokens"`
	CachedTokens int    `json:"cached_tokens,omitempty"`
	OutputTokens int    `json:"output_tokens"`
	// Estimated marks counts conch estimated (the provider reported none).
	Estimated  bool             `json:"estimated,omitempty"`
	CostUSD    float64          `json:"cost_usd,omitempty"`
	StopReason conch.StopReason `json:"stop_reason"`
	ToolCalls  int              `json:"tool_calls"`
	// Purpose is "summary" for a compaction's call, empty for the turn's own.
	Purpose string `json:"purpose,omitempty"`
}

// ModelErrorDetail is a StepModelError.
type ModelErrorDetail struct {
	Kind    conch.ErrorKind `json:"kind"`
	Error   string          `json:"error"`
	Attempt int             `json:"attempt"`
}

// FallbackDetail is a StepFallback: the turn goes on with another model.
type FallbackDetail struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Error string `json:"error"`
}

// ToolCallDetail is a StepToolCall.
type ToolCallDetail struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ToolResultDetail is a StepToolResult.
type ToolResultDetail struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	DurationMS int64  `json:"duration_ms"`
	IsError    bool   `json:"is_error"`
	Bytes      int    `json:"bytes"`
	ExitCode   *int   `json:"exit_code,omitempty"`
	// Error is set when the tool broke (a Go error ended the turn).
	Error string `json:"error,omitempty"`
}

// StoppedDetail is a StepStopped.
type StoppedDetail struct {
	Reason StopReason `json:"reason"`
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}
