package media

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"conch"
)

// DefaultMaxVoiceBytes is the largest audio file sent for transcription:
// the 25 MB OpenAI's endpoint (and Whisper servers copying it) accept.
const DefaultMaxVoiceBytes = 25 << 20

// Preparer makes the model's view of received pictures and voice: a
// prepared picture is kept beside the original in Files (by reference),
// a voice message becomes its transcript. It implements
// conch.MediaPreparer; failures become the file's MediaNote.
type Preparer struct {
	Files conch.AttachmentStore
	// Voice transcribes audio; nil leaves voice messages as files.
	Voice         conch.Transcriber
	MaxVoiceBytes int64
	Log           *slog.Logger
}

var _ conch.MediaPreparer = (*Preparer)(nil)

// IsAudio reports whether a file is sound the transcriber should hear.
func IsAudio(mediaType, name string) bool {
	mt := strings.ToLower(mediaType)
	if strings.HasPrefix(mt, "audio/") {
		return true
	}
	switch ext(name) {
	case ".ogg", ".oga", ".opus", ".mp3", ".m4a", ".wav", ".flac", ".weba":
		return true
	}
	return false
}

// IsImage reports whether a file claims to be a picture.
func IsImage(mediaType, name string) bool {
	if strings.HasPrefix(strings.ToLower(mediaType), "image/") {
		return true
	}
	switch ext(name) {
	case ".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".tif", ".tiff", ".heic", ".heif", ".avif":
		return true
	}
	return false
}

func ext(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return strings.ToLower(name[i:])
	}
	return ""
}

// Prepare implements conch.MediaPreparer.
func (p *Preparer) Prepare(ctx context.Context, key conch.ConversationKey, as []conch.Attachment) []conch.Attachment {
	out := make([]conch.Attachment, len(as))
	copy(out, as)
	for i := range out {
		a := &out[i]
		if a.Prepared || a.Ref == "" || ctx.Err() != nil {
			continue
		}
		switch {
		case IsImage(a.MediaType, a.Name):
			p.picture(ctx, key, a)
		case IsAudio(a.MediaType, a.Name) && p.Voice != nil:
			p.voice(ctx, a)
		default:
			continue
		}
		if ctx.Err() == nil {
			a.Prepared = true
		}
	}
	return out
}

func (p *Preparer) log() *slog.Logger {
	if p.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.Log
}

// picture prepares a received picture and keeps it in Files.
func (p *Preparer) picture(ctx context.Context, key conch.ConversationKey, a *conch.Attachment) {
	data, err := p.read(ctx, a.Ref, MaxInput)
	if err != nil {
		p.log().Warn("received picture not read", "file", a.Name, "err", err)
		a.MediaNote = "the picture could not be read: " + conch.UserMessage(err)
		return
	}
	pic, err := PrepareImage(data)
	if err != nil {
		p.log().Warn("received picture not prepared", "file", a.Name, "err", err)
		a.MediaNote = "the picture is not shown: " + err.Error()
		return
	}
	name := a.Path
	if name == "" {
		name = a.Name
	}
	ref, _, err := p.Files.Put(ctx, key, conch.Attachment{Name: a.Name, MediaType: pic.MediaType, Size: int64(len(pic.Data)),
		Open: func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(pic.Data)), nil }}, 0)
	if err != nil {
		p.log().Warn("prepared picture not kept", "file", a.Name, "err", err)
		a.MediaNote = "the picture could not be kept for the model: " + conch.UserMessage(err)
		return
	}
	a.Image = &conch.Image{MediaType: pic.MediaType, Name: name, Ref: ref}
}

// voice transcribes a received audio file.
func (p *Preparer) voice(ctx context.Context, a *conch.Attachment) {
	limit := p.MaxVoiceBytes
	if limit <= 0 {
		limit = DefaultMaxVoiceBytes
	}
	if a.Size > limit {
		a.MediaNote = fmt.Sprintf("not transcribed: the recording is %d MB, more than the %d MB transcription takes", a.Size>>20, limit>>20)
		return
	}
	data, err := p.read(ctx, a.Ref, limit)
	if err != nil {
		p.log().Warn("voice message not read", "file", a.Name, "err", err)
		a.MediaNote = "not transcribed: " + conch.UserMessage(err)
		return
	}
	text, err := p.Voice.Transcribe(ctx, bytes.NewReader(data), a.Name, a.MediaType)
	if err != nil {
		p.log().Warn("voice message not transcribed", "file", a.Name, "err", err)
		a.MediaNote = "not transcribed: " + conch.UserMessage(err)
		return
	}
	text = strings.TrimSpace(text)
	if text == "" {
		a.MediaNote = "transcribed, but no speech was heard"
		return
	}
	a.Transcript = text
}

// read reads a stored file of at most limit bytes.
func (p *Preparer) read(ctx context.Context, ref string, limit int64) ([]byte, error) {
	r, err := p.Files.Open(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, conch.Errorf(conch.KindInvalid, "the file is more than %d MB", limit>>20)
	}
	return data, nil
}
