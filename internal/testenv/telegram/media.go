package telegram

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	_ "image/gif" // photos the Bot API decodes
	_ "image/jpeg"
	_ "image/png"
	"net/http"
	"strings"
	"sync"
	"time"
)

// MaxPhotoBytes is the Bot API's limit on an uploaded photo.
const MaxPhotoBytes = 10 << 20

// hangs are the methods whose calls never get an answer (see Hang).
var hangs sync.Map // *Server → map[string]chan struct{}

// hold is a hanging method: its calls whose parameters match wait on ch.
type hold struct {
	ch    chan struct{}
	match func(params map[string]string) bool
}

// Hang makes every call of method wait without an answer until release is
// called or the caller goes away (a process killed mid-send). The calls
// are recorded (Calls) but do nothing.
func (s *Server) Hang(method string) (release func()) {
	return s.HangIf(method, nil)
}

// HangIf is Hang for the calls whose parameters match (nil: every call).
func (s *Server) HangIf(method string, match func(params map[string]string) bool) (release func()) {
	ch := make(chan struct{})
	m, _ := hangs.LoadOrStore(s, &sync.Map{})
	m.(*sync.Map).Store(strings.ToLower(method), hold{ch: ch, match: match})
	var once sync.Once
	return func() {
		once.Do(func() {
			m.(*sync.Map).Delete(strings.ToLower(method))
			close(ch)
		})
	}
}

// hang blocks a call of a hanging method; it reports whether it did.
func (s *Server) hang(r *http.Request, method string, params map[string]string) bool {
	m, ok := hangs.Load(s)
	if !ok {
		return false
	}
	v, ok := m.(*sync.Map).Load(strings.ToLower(method))
	if !ok {
		return false
	}
	h := v.(hold)
	if h.match != nil && !h.match(params) {
		return false
	}
	select {
	case <-h.ch:
	case <-r.Context().Done():
	}
	return true
}

// photoUpload finds an uploaded photo: a file field, or attach://name.
func photoUpload(field string, p reqParams, files map[string]Upload) (Upload, bool) {
	if up, ok := files[field]; ok {
		return up, true
	}
	if name, ok := strings.CutPrefix(p[field], "attach://"); ok {
		up, ok := files[name]
		return up, ok
	}
	return Upload{}, false
}

// checkPhoto answers as the Bot API does for a photo it cannot take.
func checkPhoto(w http.ResponseWriter, up Upload) (image.Config, bool) {
	switch {
	case len(up.Data) == 0:
		badRequest(w, "file must be non-empty")
		return image.Config{}, false
	case len(up.Data) > MaxPhotoBytes:
		badRequest(w, "PHOTO_INVALID_DIMENSIONS")
		return image.Config{}, false
	}
	cfg, _, err := image.DecodeConfig(bytes.NewReader(up.Data))
	if err != nil {
		badRequest(w, "IMAGE_PROCESS_FAILED")
		return image.Config{}, false
	}
	if cfg.Width+cfg.Height > 10000 || cfg.Width > 20*cfg.Height || cfg.Height > 20*cfg.Width {
		badRequest(w, "PHOTO_INVALID_DIMENSIONS")
		return image.Config{}, false
	}
	return cfg, true
}

func (s *Server) photoSizesLocked(up Upload, cfg image.Config) []PhotoSize {
	f := s.addFileLocked(up.Data, "photos", ".jpg")
	return []PhotoSize{{FileID: f.FileID, FileUniqueID: f.FileUniqueID, Width: cfg.Width, Height: cfg.Height, FileSize: f.FileSize}}
}

func (s *Server) sendPhoto(w http.ResponseWriter, p reqParams, files map[string]Upload) {
	s.mu.Lock()
	defer s.mu.Unlock()
	chat, ok := s.chatLocked(w, p)
	if !ok {
		return
	}
	up, ok := photoUpload("photo", p, files)
	if !ok {
		badRequest(w, "there is no photo in the request")
		return
	}
	cfg, ok := checkPhoto(w, up)
	if !ok {
		return
	}
	caption, ents := "", []Entity(nil)
	if p["caption"] != "" {
		if caption, ents, ok = parseText(w, p["caption"], p["parse_mode"], MaxCaptionLen, "caption"); !ok {
			return
		}
	}
	reply, ok := s.replyTo(w, p, chat.ID)
	if !ok {
		return
	}
	bot := s.Bot
	m := s.storeLocked(Message{From: &bot, Chat: chat, Caption: caption, CaptionEntities: ents, Photo: s.photoSizesLocked(up, cfg)})
	upCopy := up
	s.sent = append(s.sent, Sent{Method: "sendPhoto", ChatID: chat.ID, MessageID: m.MessageID, Text: caption, Raw: p["caption"],
		ParseMode: p["parse_mode"], Entities: ents, Silent: p.bool("disable_notification"), ReplyTo: reply, Photo: &upCopy, At: time.Now()})
	s.notifyLocked()
	writeOK(w, m)
}

// inputMedia is one element of sendMediaGroup's media.
type inputMedia struct {
	Type    string `json:"type"`
	Media   string `json:"media"`
	Caption string `json:"caption"`
}

// sendMediaGroup takes 2 to 10 photos or documents (not mixed) and answers
// with their messages, which share a media_group_id.
func (s *Server) sendMediaGroup(w http.ResponseWriter, p reqParams, files map[string]Upload) {
	s.mu.Lock()
	defer s.mu.Unlock()
	chat, ok := s.chatLocked(w, p)
	if !ok {
		return
	}
	var media []inputMedia
	if err := json.Unmarshal([]byte(p["media"]), &media); err != nil {
		badRequest(w, "can't parse media JSON object")
		return
	}
	if len(media) < 2 || len(media) > 10 {
		badRequest(w, "wrong number of media in the group: "+fmt.Sprint(len(media))+" (2 to 10)")
		return
	}
	ups := make([]Upload, len(media))
	cfgs := make([]image.Config, len(media))
	for i, m := range media {
		if m.Type != "photo" {
			badRequest(w, "media of type "+m.Type+" is not supported here")
			return
		}
		name, ok := strings.CutPrefix(m.Media, "attach://")
		up, found := files[name]
		if !ok || !found {
			badRequest(w, "wrong file identifier/HTTP URL specified")
			return
		}
		if cfgs[i], ok = checkPhoto(w, up); !ok {
			return
		}
		ups[i] = up
	}
	reply, ok := s.replyTo(w, p, chat.ID)
	if !ok {
		return
	}
	bot := s.Bot
	group := fmt.Sprintf("1%017d", time.Now().UnixNano()%1e17)
	out := make([]Message, len(media))
	for i := range media {
		m := s.storeLocked(Message{From: &bot, Chat: chat, Caption: media[i].Caption, Photo: s.photoSizesLocked(ups[i], cfgs[i]), MediaGroupID: group})
		out[i] = m
		upCopy := ups[i]
		s.sent = append(s.sent, Sent{Method: "sendMediaGroup", ChatID: chat.ID, MessageID: m.MessageID, Text: media[i].Caption,
			Silent: p.bool("disable_notification"), ReplyTo: reply, Photo: &upCopy, MediaGroupID: group, At: time.Now()})
	}
	s.notifyLocked()
	writeOK(w, out)
}
