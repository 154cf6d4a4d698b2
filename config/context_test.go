package config

import (
	"strings"
	"testing"
)

func TestContextWindowOverride(t *testing.T) {
	env := []string{"XDG_CONFIG_HOME=" + t.TempDir(), "CONCH_MODEL_PROVIDER=openai", "CONCH_MODEL=gpt-test", "CONCH_MODEL_API_KEY=k"}
	c, err := Load("", env)
	if err != nil {
		t.Fatal(err)
	}
	if c.Model.ContextWindow != 0 {
		t.Errorf("default context_window = %d, want 0 (from the model's name)", c.Model.ContextWindow)
	}
	c, err = Load("", append(env, "CONCH_MODEL_CONTEXT_WINDOW=16000"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Model.ContextWindow != 16000 {
		t.Errorf("CONCH_MODEL_CONTEXT_WINDOW=16000 gave %d", c.Model.ContextWindow)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	c.Model.ContextWindow = 100
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "model.context_window") {
		t.Errorf("a 100-token window: Validate = %v, want an error naming model.context_window", err)
	}
}
