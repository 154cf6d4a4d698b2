package config

import (
	"fmt"
	"net/url"
	"os"
	"strings"
)

// MediaConfig says which models see pictures: the built-in table
// (llm.Vision) decides by the model's name; Vision overrides it per name
// ("llava:13b" = true, "gpt-4o" = false).
type MediaConfig struct {
	Vision map[string]bool `toml:"vision" env:"-"`
}

// VisionOverride returns the configured vision of a model, if any.
func (m MediaConfig) VisionOverride(model string) (vision, set bool) {
	vision, set = m.Vision[model]
	return vision, set
}

// VoiceConfig configures transcription of received voice and audio.
type VoiceConfig struct {
	// Provider is "" (voice stays a file), "openai": an OpenAI-compatible
	// POST …/audio/transcriptions (OpenAI, or a self-hosted Whisper server),
	// or "gemini": Gemini's audio input (model e.g. gemini-2.5-flash).
	Provider   string `toml:"provider" env:"PROVIDER"`
	BaseURL    string `toml:"base_url" env:"BASE_URL"`
	APIKey     string `toml:"api_key" env:"API_KEY"`
	APIKeyFile string `toml:"api_key_file" env:"API_KEY_FILE"`
	Model      string `toml:"model" env:"MODEL"`
	// Language is an ISO-639-1 hint; "" detects it.
	Language string   `toml:"language" env:"LANGUAGE"`
	Timeout  Duration `toml:"timeout" env:"TIMEOUT"`
	// MaxBytes caps a recording sent for transcription.
	MaxBytes int64 `toml:"max_bytes" env:"MAX_BYTES"`
}

// Enabled reports whether voice is transcribed.
func (v VoiceConfig) Enabled() bool { return v.Provider != "" }

// LoadSecrets fills APIKey from api_key_file when it is not set.
func (v *VoiceConfig) LoadSecrets() error {
	if v.APIKeyFile == "" || v.APIKey != "" {
		return nil
	}
	b, err := os.ReadFile(v.APIKeyFile)
	if err != nil {
		return fmt.Errorf("voice.api_key_file: %w", err)
	}
	if v.APIKey = strings.TrimSpace(string(b)); v.APIKey == "" {
		return fmt.Errorf("voice.api_key_file: %s is empty", v.APIKeyFile)
	}
	return nil
}

func (v VoiceConfig) validate() []Problem {
	var ps []Problem
	switch v.Provider {
	case "":
		return nil
	case "openai":
	case "gemini":
		if !strings.HasPrefix(v.Model, "gemini") {
			ps = append(ps, Problem{"voice.model", fmt.Sprintf("%q is not a Gemini model", v.Model), "set [voice] model to a Gemini model that takes audio, e.g. gemini-2.5-flash"})
		}
		if v.APIKey == "" && v.APIKeyFile == "" {
			ps = append(ps, Problem{"voice.api_key", "Gemini needs an API key", "set CONCH_VOICE_API_KEY or [voice] api_key_file"})
		}
	default:
		ps = append(ps, Problem{"voice.provider", fmt.Sprintf("unknown transcription provider %q", v.Provider), "use openai (any OpenAI-compatible transcription endpoint, self-hosted Whisper servers included), gemini, or leave it empty"})
	}
	if v.BaseURL != "" {
		if u, err := url.Parse(v.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			ps = append(ps, Problem{"voice.base_url", fmt.Sprintf("%q is not an http(s) URL", v.BaseURL), "set [voice] base_url to the API's …/v1 URL"})
		}
	}
	if v.Model == "" {
		ps = append(ps, Problem{"voice.model", "no transcription model", "set [voice] model (whisper-1, gpt-4o-mini-transcribe, or your server's model)"})
	}
	if v.MaxBytes <= 0 || v.MaxBytes > 1<<30 {
		ps = append(ps, Problem{"voice.max_bytes", fmt.Sprintf("%d is not a usable limit", v.MaxBytes), "set [voice] max_bytes to the endpoint's limit (OpenAI: 26214400)"})
	}
	return ps
}
