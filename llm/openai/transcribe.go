package openai

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"conch"
)

// TranscriberConfig configures a Transcriber.
type TranscriberConfig struct {
	// BaseURL of an OpenAI-compatible API (…/v1); a self-hosted Whisper
	// server (faster-whisper-server, whisper.cpp's server, LocalAI)
	// serves the same /audio/transcriptions.
	BaseURL string
	APIKey  string
	// Model is "whisper-1", "gpt-4o-mini-transcribe", or the server's name.
	Model string
	// Language is an ISO-639-1 hint ("" detects it).
	Language   string
	Timeout    time.Duration
	HTTPClient *http.Client
}

// Transcriber is conch.Transcriber over POST /audio/transcriptions, with
// the official SDK (retries off, environment ignored).
type Transcriber struct {
	cfg TranscriberConfig
	svc oai.AudioTranscriptionService
}

var _ conch.Transcriber = (*Transcriber)(nil)

// NewTranscriber returns a Transcriber for cfg.
func NewTranscriber(cfg TranscriberConfig) (*Transcriber, error) {
	if cfg.Model == "" {
		return nil, errors.New("openai transcriber: config: Model is required (e.g. \"whisper-1\")")
	}
	base := strings.TrimSpace(cfg.BaseURL)
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openai transcriber: config: BaseURL %q is not an http(s) URL", cfg.BaseURL)
	}
	if u.Hostname() == "api.openai.com" && cfg.APIKey == "" {
		return nil, errors.New("openai transcriber: config: APIKey is required for api.openai.com")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	opts := []option.RequestOption{option.WithBaseURL(base), option.WithHTTPClient(hc), option.WithMaxRetries(0)}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	return &Transcriber{cfg: cfg, svc: oai.NewAudioTranscriptionService(opts...)}, nil
}

// Transcribe implements conch.Transcriber.
func (t *Transcriber) Transcribe(ctx context.Context, audio io.Reader, name, mediaType string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
	defer cancel()
	p := oai.AudioTranscriptionNewParams{
		File:  oai.File(audio, transcribeName(name, mediaType), mediaType),
		Model: oai.AudioModel(t.cfg.Model),
	}
	if t.cfg.Language != "" {
		p.Language = oai.String(t.cfg.Language)
	}
	res, err := t.svc.New(ctx, p)
	if err != nil {
		var apiErr *oai.Error
		if errors.As(err, &apiErr) {
			msg := apiErr.Message
			if msg == "" {
				msg = strings.TrimSpace(apiErr.RawJSON())
			}
			kind := conch.KindInvalid
			if apiErr.StatusCode == http.StatusTooManyRequests || apiErr.StatusCode >= 500 {
				kind = conch.KindTransient
			}
			return "", &conch.Error{Kind: kind, User: fmt.Sprintf("the transcription service answered HTTP %d: %s", apiErr.StatusCode, clipMsg(msg, 200)), Err: err}
		}
		if ctx.Err() != nil {
			return "", &conch.Error{Kind: conch.KindTransient, User: fmt.Sprintf("the transcription service did not answer within %s", t.cfg.Timeout), Err: err}
		}
		return "", &conch.Error{Kind: conch.KindUnavailable, User: "the transcription service cannot be reached", Err: err}
	}
	return res.Text, nil
}

// transcribeName gives the file an extension the endpoint recognises: it
// decides the format by the name (a Telegram voice note is OGG/Opus).
func transcribeName(name, mediaType string) string {
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		return name
	}
	mt, _, _ := strings.Cut(mediaType, ";")
	switch strings.TrimSpace(mt) {
	case "audio/ogg", "audio/opus":
		return name + ".ogg"
	case "audio/webm", "video/webm":
		return name + ".webm"
	case "audio/mpeg", "audio/mp3":
		return name + ".mp3"
	case "audio/mp4", "audio/m4a", "audio/x-m4a":
		return name + ".m4a"
	case "audio/wav", "audio/x-wav", "audio/wave":
		return name + ".wav"
	}
	return name
}

func clipMsg(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
