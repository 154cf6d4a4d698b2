package main

import (
	"fmt"

	"conch"
	"conch/agent"
	"conch/config"
	"conch/gateway"
	"conch/llm"
	"conch/llm/gemini"
	"conch/llm/openai"
	"conch/media"
)

// --- pictures and voice in (media/, llm/vision.go, [media], [voice]) ---

// vision says whether a configured model sees pictures: [media] vision,
// else the table by its name; an unknown name is logged once.
func vision(d *deps, model string) bool {
	if v, set := d.cfg.Media.VisionOverride(model); set {
		return v
	}
	v, known := llm.Vision(model)
	if !known {
		d.log.Info("unknown whether the model sees pictures; it gets notes naming them (set [media] vision to override)", "model", model)
	}
	return v
}

// wireMediaAgent gives the agent its pictures (vision of every configured model,
// kept in the spool); wireMediaGateway gives the gateway its preparer of
// received pictures and voice.
func wireMediaAgent(d *deps, opts *agent.Options) {
	opts.Vision = vision(d, d.cfg.Model.Name)
	for i := range opts.Fallbacks {
		opts.Fallbacks[i].Vision = vision(d, d.cfg.Model.Fallbacks[i].Name)
	}
	if d.spool != nil {
		opts.Media = d.spool
	}
}

func wireMediaGateway(d *deps, opts *gateway.Options) error {
	if d.spool == nil {
		return nil
	}
	p := &media.Preparer{Files: d.spool, Log: d.log, MaxVoiceBytes: d.cfg.Voice.MaxBytes}
	if d.cfg.Voice.Enabled() {
		t, err := newTranscriber(d.cfg.Voice)
		if err != nil {
			return err
		}
		p.Voice = t
	}
	opts.Media = p
	return nil
}

func newTranscriber(v config.VoiceConfig) (conch.Transcriber, error) {
	if err := v.LoadSecrets(); err != nil {
		return nil, err
	}
	if v.Provider == "gemini" {
		return gemini.New(gemini.Config{BaseURL: v.BaseURL, APIKey: v.APIKey, Model: v.Model, Timeout: v.Timeout.D()})
	}
	return openai.NewTranscriber(openai.TranscriberConfig{BaseURL: v.BaseURL, APIKey: v.APIKey, Model: v.Model, Language: v.Language, Timeout: v.Timeout.D()})
}

// visionLine is conch doctor's line on whether the model sees pictures.
func visionLine(cfg *config.Config) string {
	name := cfg.Model.Name
	if v, set := cfg.Media.VisionOverride(name); set {
		return fmt.Sprintf("%s sees pictures: %s ([media] vision)", name, yesNo(v))
	}
	v, known := llm.Vision(name)
	if !known {
		return fmt.Sprintf("%s is not in the vision table: pictures are named to it, not shown (set [media] vision to override)", name)
	}
	return fmt.Sprintf("%s sees pictures: %s", name, yesNo(v))
}
