package gemini_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"conch"
	"conch/internal/testenv/fakellm"
	"conch/llm/gemini"
	"conch/llm/internal/llmtest"
	"conch/media/mediatest"
)

// Gemini's audio input as a transcriber: the recording goes inline with
// the request for its words; the answer is the transcript.
func TestTranscribe(t *testing.T) {
	s := fakellm.New(t)
	s.Handle(func(r fakellm.Request) fakellm.Reply {
		if len(r.Messages) != 1 || len(r.Messages[0].Audio) != 1 || !strings.Contains(r.Messages[0].Text, "Transcribe") {
			return fakellm.Error(400, "unexpected request")
		}
		return fakellm.Text(r.Messages[0].Audio[0].Said() + "\n")
	})
	m, err := gemini.New(gemini.Config{BaseURL: s.BaseURL(fakellm.Gemini), APIKey: llmtest.APIKey, Model: "gemini-2.5-flash"})
	if err != nil {
		t.Fatal(err)
	}
	voice := mediatest.Voice("call mum at six")
	text, err := m.Transcribe(context.Background(), bytes.NewReader(voice), "voice.ogg", "audio/ogg; codecs=opus")
	if err != nil || text != "call mum at six" {
		t.Fatalf("Transcribe = %q, %v", text, err)
	}
	req, _ := s.Last()
	if a := req.Messages[0].Audio[0]; a.MediaType != "audio/ogg" || !bytes.Equal(a.Data, voice) {
		t.Fatalf("audio sent: %s, %d bytes", a.MediaType, len(a.Data))
	}
	// A format Gemini does not take: its own 400, in words.
	_, err = m.Transcribe(context.Background(), bytes.NewReader(voice), "voice.webm", "audio/webm")
	var ce *conch.Error
	if !errors.As(err, &ce) || !strings.Contains(conch.UserMessage(err), "Unsupported MIME type") {
		t.Fatalf("webm: err = %v (%q)", err, conch.UserMessage(err))
	}
}
