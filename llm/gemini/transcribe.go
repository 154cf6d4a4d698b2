package gemini

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"google.golang.org/genai"

	"conch"
)

// MaxAudioBytes is the largest recording sent inline (a request carries at
// most 20 MB of inline data).
const MaxAudioBytes = 19 << 20

// transcribePrompt asks for the words only.
const transcribePrompt = "Transcribe this recording verbatim, in its own language. Answer with the spoken words only: no preamble, no notes, no quotes. If nothing is said, answer with nothing."

var _ conch.Transcriber = (*Model)(nil)

// Transcribe implements conch.Transcriber with Gemini's audio input: the
// recording as an inline part and a request for its words.
func (m *Model) Transcribe(ctx context.Context, audio io.Reader, name, mediaType string) (string, error) {
	const op = "gemini transcribe"
	data, err := io.ReadAll(io.LimitReader(audio, MaxAudioBytes+1))
	if err != nil {
		return "", fmt.Errorf("%s: read %s: %w", op, name, err)
	}
	if len(data) > MaxAudioBytes {
		return "", &conch.Error{Kind: conch.KindInvalid, User: fmt.Sprintf("the recording is more than the %d MB Gemini takes inline", MaxAudioBytes>>20)}
	}
	mt, _, _ := strings.Cut(mediaType, ";")
	mt = strings.TrimSpace(mt)
	if mt == "audio/mpeg" {
		mt = "audio/mp3"
	}
	contents := []*genai.Content{{Role: genai.RoleUser, Parts: []*genai.Part{
		{InlineData: &genai.Blob{MIMEType: mt, Data: data}}, {Text: transcribePrompt},
	}}}
	callCtx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	captured := &capturedHeader{}
	callCtx = context.WithValue(callCtx, capturedKey{}, captured)
	out, err := m.client.Models.GenerateContent(callCtx, m.model, contents, nil)
	if err != nil {
		err = m.fail(ctx, op, err, captured.header)
		var me *conch.ModelError
		if errors.As(err, &me) {
			return "", &conch.Error{Kind: me.Kind, User: fmt.Sprintf("Gemini answered HTTP %d: %.200s", me.Status, me.Message), Err: err}
		}
		return "", &conch.Error{Kind: conch.KindUnavailable, User: "Gemini cannot be reached", Err: err}
	}
	resp, err := m.response(out)
	if err != nil {
		return "", fmt.Errorf("%s: %w", op, err)
	}
	return strings.TrimSpace(resp.Text), nil
}
