package anthropic_test

import (
	"testing"
	"time"

	"conch"
	"conch/internal/testenv/fakellm"
	"conch/llm/anthropic"
	"conch/llm/internal/llmtest"
)

func newModel(tb testing.TB, baseURL string, timeout time.Duration) conch.Model {
	tb.Helper()
	m, err := anthropic.New(anthropic.Config{BaseURL: baseURL, APIKey: llmtest.APIKey, Model: "test-model", Timeout: timeout})
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return m
}

func TestContract(t *testing.T) { llmtest.Run(t, fakellm.Anthropic, newModel) }
