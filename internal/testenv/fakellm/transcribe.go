package fakellm

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strings"
)

// Transcription is a POST /v1/audio/transcriptions the fake received
// (OpenAI's endpoint, which self-hosted Whisper servers copy).
type Transcription struct {
	Model, Language string
	// Name and MediaType are the file part's file name and Content-Type.
	Name, MediaType string
	Data            []byte
}

// MaxTranscriptionBytes is the endpoint's limit on a request (25 MB).
const MaxTranscriptionBytes = 25 << 20

// transcriptionFormats are the file extensions the endpoint takes.
var transcriptionFormats = []string{"flac", "m4a", "mp3", "mp4", "mpeg", "mpga", "oga", "ogg", "wav", "webm"}

// Transcribe sets how the fake transcribes audio; by default the text is
// what follows "SAY:" in the file (tests write it into the audio they
// make), up to a NUL or a line end.
func (s *Server) Transcribe(f func(Transcription) (string, error)) {
	s.mu.Lock()
	s.transcriber = f
	s.mu.Unlock()
}

// Transcriptions returns the transcription requests received, in order.
func (s *Server) Transcriptions() []Transcription {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Transcription(nil), s.transcriptions...)
}

func (s *Server) serveTranscription(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, msg, typ string) {
		s.writeJSON(w, status, nil, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
	}
	if r.Method != http.MethodPost {
		fail(http.StatusMethodNotAllowed, "Method not allowed", "invalid_request_error")
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "multipart/form-data" {
		fail(http.StatusBadRequest, "Invalid Content-Type header (expected multipart/form-data)", "invalid_request_error")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxTranscriptionBytes+1))
	if err != nil {
		return
	}
	if len(body) > MaxTranscriptionBytes {
		n, _ := io.Copy(io.Discard, r.Body)
		fail(http.StatusRequestEntityTooLarge, fmt.Sprintf("Maximum content size limit (%d) exceeded (%d bytes read)", MaxTranscriptionBytes, int64(len(body))+n), "server_error")
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err := r.ParseMultipartForm(MaxTranscriptionBytes); err != nil {
		fail(http.StatusBadRequest, "Could not parse multipart form: "+err.Error(), "invalid_request_error")
		return
	}
	tr := Transcription{Model: r.FormValue("model"), Language: r.FormValue("language")}
	f, fh, err := r.FormFile("file")
	if errors.Is(err, http.ErrMissingFile) {
		fail(http.StatusBadRequest, "you must provide a file", "invalid_request_error")
		return
	}
	if err != nil {
		fail(http.StatusBadRequest, err.Error(), "invalid_request_error")
		return
	}
	tr.Name, tr.MediaType = fh.Filename, fh.Header.Get("Content-Type")
	tr.Data, _ = io.ReadAll(f)
	f.Close()
	if tr.Model == "" {
		fail(http.StatusBadRequest, "you must provide a model parameter", "invalid_request_error")
		return
	}
	ext := strings.TrimPrefix(strings.ToLower(path.Ext(tr.Name)), ".")
	known := false
	for _, e := range transcriptionFormats {
		known = known || e == ext
	}
	if !known {
		fail(http.StatusBadRequest, fmt.Sprintf("Invalid file format. Supported formats: ['%s']", strings.Join(transcriptionFormats, "', '")), "invalid_request_error")
		return
	}
	if !audioMagic(tr.Data) {
		fail(http.StatusBadRequest, "Audio file might be corrupted or unsupported", "invalid_request_error")
		return
	}
	s.mu.Lock()
	s.transcriptions = append(s.transcriptions, tr)
	h := s.transcriber
	s.mu.Unlock()
	text := said(tr.Data)
	if h != nil {
		if text, err = h(tr); err != nil {
			fail(http.StatusInternalServerError, err.Error(), "server_error")
			return
		}
	}
	s.writeJSON(w, http.StatusOK, nil, map[string]any{"text": text, "usage": map[string]any{"type": "duration", "seconds": 1 + len(tr.Data)/16000}})
}

// audioMagic reports whether data starts like an audio container the
// endpoint decodes (Ogg, WebM/Matroska, WAV, FLAC, MP3, MP4).
func audioMagic(data []byte) bool {
	switch {
	case bytes.HasPrefix(data, []byte("OggS")),
		bytes.HasPrefix(data, []byte{0x1A, 0x45, 0xDF, 0xA3}),
		len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WAVE",
		bytes.HasPrefix(data, []byte("fLaC")),
		bytes.HasPrefix(data, []byte("ID3")),
		len(data) >= 2 && data[0] == 0xFF && data[1]&0xE0 == 0xE0,
		len(data) >= 8 && string(data[4:8]) == "ftyp":
		return true
	}
	return false
}

// said is the text after "SAY:" in data.
func said(data []byte) string {
	_, rest, ok := bytes.Cut(data, []byte("SAY:"))
	if !ok {
		return ""
	}
	if i := bytes.IndexAny(rest, "\x00\n"); i >= 0 {
		rest = rest[:i]
	}
	return string(rest)
}

// Audio is a recording a Gemini request carried inline.
type Audio struct {
	MediaType string
	Data      []byte
}

// Said is the text after "SAY:" in the recording (what the fake hears).
func (a Audio) Said() string { return said(a.Data) }

// geminiAudioTypes are the audio formats the Gemini API documents.
var geminiAudioTypes = []string{"audio/wav", "audio/mp3", "audio/aiff", "audio/aac", "audio/ogg", "audio/flac"}

func decodeGeminiAudio(where, mediaType, b64 string) (Audio, error) {
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return Audio{}, &mediaError{msg: fmt.Sprintf("Invalid value at '%s.inline_data.data' (TYPE_BYTES), Base64 decoding failed", where)}
	}
	known := false
	for _, t := range geminiAudioTypes {
		known = known || t == mediaType
	}
	if !known {
		return Audio{}, &mediaError{msg: fmt.Sprintf("Unsupported MIME type: %s", mediaType)}
	}
	if !audioMagic(data) {
		return Audio{}, &mediaError{msg: "The audio file could not be processed."}
	}
	return Audio{MediaType: mediaType, Data: data}, nil
}
