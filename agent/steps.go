package agent

import (
	"encoding/json"
	"strings"

	"conch"
)

// The details of recorded steps (conch.Step.Detail), one type per kind.

// ModelCallDetail is a StepModelCall.
type ModelCallDetail struct {
	Model        string           `json:"model"`
	DurationMS   int64            `json:"duration_ms"`
	InputTokens  int              `json:"input_tokens"`
	OutputTokens int              `json:"output_tokens"`
	StopReason   conch.StopReason `json:"stop_reason"`
	ToolCalls    int              `json:"tool_calls"`
	// Purpose is "summary" for a compaction's call, empty for the turn's own.
	Purpose string `json:"purpose,omitempty"`
}

// ModelErrorDetail is a StepModelError.
type ModelErrorDetail struct {
	Kind    conch.ErrorKind `json:"kind"`
	Error   string          `json:"error"`
	Attempt int             `json:"attempt"`
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
