package openai_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"conch"
	"conch/internal/testenv/fakellm"
	"conch/llm/openai"
)

// oggVoice is a stand-in voice note: an Ogg page header and the words the
// fake transcription endpoint hears.
func oggVoice(words string) []byte {
	return []byte("OggS\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00OpusHead SAY:" + words + "\x00")
}

func TestTranscriber(t *testing.T) {
	s := fakellm.New(t)
	tr, err := openai.NewTranscriber(openai.TranscriberConfig{BaseURL: s.BaseURL(fakellm.OpenAI), APIKey: "sk-test", Model: "whisper-1", Language: "en"})
	if err != nil {
		t.Fatal(err)
	}
	text, err := tr.Transcribe(context.Background(), strings.NewReader(string(oggVoice("turn on the lights"))), "voice_12", "audio/ogg")
	if err != nil || text != "turn on the lights" {
		t.Fatalf("Transcribe = %q, %v", text, err)
	}
	got := s.Transcriptions()
	if len(got) != 1 || got[0].Model != "whisper-1" || got[0].Language != "en" || got[0].Name != "voice_12.ogg" || got[0].MediaType != "audio/ogg" {
		t.Fatalf("received %+v", got)
	}

	// Not audio: the endpoint's own 400, as a clear error.
	_, err = tr.Transcribe(context.Background(), strings.NewReader("plain text"), "notes.ogg", "audio/ogg")
	var ce *conch.Error
	if !errors.As(err, &ce) || ce.Kind != conch.KindInvalid || !strings.Contains(conch.UserMessage(err), "corrupted or unsupported") {
		t.Fatalf("bad audio: err = %v (%q)", err, conch.UserMessage(err))
	}
	// Too large: 413 with the endpoint's words.
	big := append(oggVoice("x"), make([]byte, fakellm.MaxTranscriptionBytes)...)
	_, err = tr.Transcribe(context.Background(), strings.NewReader(string(big)), "long.ogg", "audio/ogg")
	if !errors.As(err, &ce) || !strings.Contains(conch.UserMessage(err), "413") {
		t.Fatalf("too large: err = %v (%q)", err, conch.UserMessage(err))
	}
}
