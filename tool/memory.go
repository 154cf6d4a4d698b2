// Package tool holds the built-in tools, one file each.
package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"conch"
)

// Limits of remembered facts, so one conversation cannot bloat every prompt.
const (
	maxFactKey   = 64
	maxFactValue = 500
	maxFacts     = 100
)

// Remember is the tool `remember(key, value)`: it stores a fact about the
// person, injected into every later system prompt.
type Remember struct{}

// Forget is the tool `forget(key)`.
type Forget struct{}

var (
	_ conch.Tool = Remember{}
	_ conch.Tool = Forget{}
)

// Spec implements conch.Tool.
func (Remember) Spec() conch.ToolSpec {
	return conch.ToolSpec{
		Name:        "remember",
		Description: "Remember a stable fact about the person you are talking to (name, preferences, ongoing projects). It is shown to you in every later conversation with them, in the <memory> block. Storing an existing key replaces its value.",
		Parameters:  schemaFor[rememberArgs](),
	}
}

type rememberArgs struct {
	Key   string `json:"key" jsonschema:"short identifier, e.g. name, timezone, editor"`
	Value string `json:"value" jsonschema:"the fact"`
}

// Run implements conch.Tool.
func (Remember) Run(ctx context.Context, env conch.ToolEnv, raw json.RawMessage) (conch.ToolOutput, error) {
	var args rememberArgs
	if err := json.Unmarshal(raw, &args); err != nil {
		return conch.ToolFail("remember needs {\"key\": string, \"value\": string}: " + err.Error()), nil
	}
	key, value := normKey(args.Key), strings.TrimSpace(args.Value)
	if msg := checkFact(key, value); msg != "" {
		return conch.ToolFail(msg), nil
	}
	if env.Facts == nil {
		return conch.ToolFail("memory is not available in this conversation"), nil
	}
	facts, err := env.Facts.Facts(ctx, env.User)
	if err != nil {
		return conch.ToolOutput{}, fmt.Errorf("remember: %w", err)
	}
	if len(facts) >= maxFacts && !hasKey(facts, key) {
		return conch.ToolFail(fmt.Sprintf("memory is full (%d facts); forget something first", maxFacts)), nil
	}
	if err := env.Facts.Remember(ctx, env.User, key, value); err != nil {
		return conch.ToolOutput{}, fmt.Errorf("remember: %w", err)
	}
	return conch.ToolOK(fmt.Sprintf("remembered %s", key)), nil
}

// Spec implements conch.Tool.
func (Forget) Spec() conch.ToolSpec {
	return conch.ToolSpec{
		Name:        "forget",
		Description: "Forget a fact stored with remember, by its key.",
		Parameters:  schemaFor[forgetArgs](),
	}
}

type forgetArgs struct {
	Key string `json:"key"`
}

// Run implements conch.Tool.
func (Forget) Run(ctx context.Context, env conch.ToolEnv, raw json.RawMessage) (conch.ToolOutput, error) {
	var args forgetArgs
	if err := json.Unmarshal(raw, &args); err != nil {
		return conch.ToolFail("forget needs {\"key\": string}: " + err.Error()), nil
	}
	key := normKey(args.Key)
	if key == "" {
		return conch.ToolFail("forget needs a non-empty key"), nil
	}
	if env.Facts == nil {
		return conch.ToolFail("memory is not available in this conversation"), nil
	}
	ok, err := env.Facts.Forget(ctx, env.User, key)
	if err != nil {
		return conch.ToolOutput{}, fmt.Errorf("forget: %w", err)
	}
	if !ok {
		return conch.ToolFail(fmt.Sprintf("there is no fact named %s", key)), nil
	}
	return conch.ToolOK("forgot " + key), nil
}

func normKey(k string) string { return strings.ToLower(strings.Join(strings.Fields(k), "_")) }

func checkFact(key, value string) string {
	switch {
	case key == "":
		return "remember needs a non-empty key"
	case value == "":
		return "remember needs a non-empty value (use forget to remove a fact)"
	case utf8.RuneCountInString(key) > maxFactKey:
		return fmt.Sprintf("the key is longer than %d characters", maxFactKey)
	case utf8.RuneCountInString(value) > maxFactValue:
		return fmt.Sprintf("the value is longer than %d characters; store a summary", maxFactValue)
	case strings.Contains(value, "</memory>"):
		return "the value may not contain </memory>"
	}
	return ""
}

func hasKey(facts []conch.Fact, key string) bool {
	for _, f := range facts {
		if f.Key == key {
			return true
		}
	}
	return false
}
