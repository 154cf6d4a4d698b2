package discord

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// bucket is one route's rate limit window.
type bucket struct {
	id        string
	remaining int
	resetAt   time.Time
}

type apiErr struct {
	status  int
	code    int
	message string
}

func (s *Server) writeErr(w http.ResponseWriter, e apiErr) {
	writeJSON(w, e.status, map[string]any{"message": e.message, "code": e.code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if v != nil {
		_ = json.NewEncoder(w).Encode(v)
	}
}

var routeRE = regexp.MustCompile(`^/api/v(?:9|10)(/.*)$`)

// route is a request's method and path with ids replaced, except the
// top-level ("major") channel id that buckets are kept per.
func route(method, path string) (key, major string) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i, p := range parts {
		if i == 1 && parts[0] == "channels" {
			major = p
		}
		if _, err := strconv.ParseUint(p, 10, 64); err == nil {
			parts[i] = "{id}"
		}
	}
	return method + " /" + strings.Join(parts, "/"), major
}

// Fail makes the next f.Times requests of route ("POST /channels/{id}/messages"
// with the channel id kept, e.g. "POST /channels/123/messages"; "*" for
// any) fail with f.
func (s *Server) Fail(route string, f Fault) {
	if f.Times <= 0 {
		f.Times = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[route] = append(s.faults[route], f)
}

func (s *Server) takeFaultLocked(routes ...string) (Fault, bool) {
	for _, r := range append(routes, "*") {
		q := s.faults[r]
		if len(q) == 0 {
			continue
		}
		f := q[0]
		q[0].Times--
		if q[0].Times <= 0 {
			s.faults[r] = q[1:]
		}
		return f, true
	}
	return Fault{}, false
}

func (s *Server) serveREST(w http.ResponseWriter, r *http.Request) {
	m := routeRE.FindStringSubmatch(r.URL.Path)
	if m == nil {
		s.writeErr(w, apiErr{http.StatusNotFound, 0, "404: Not Found"})
		return
	}
	path := m[1]
	if strings.HasPrefix(path, "/interactions/") {
		s.interactionCallback(w, r, path)
		return
	}
	if path == "/gateway" {
		writeJSON(w, http.StatusOK, map[string]any{"url": "ws" + strings.TrimPrefix(s.URL, "http")})
		return
	}
	if a := r.Header.Get("Authorization"); a != "Bot "+s.Token {
		s.writeErr(w, apiErr{http.StatusUnauthorized, 0, "401: Unauthorized"})
		return
	}
	key, major := route(r.Method, path)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notifyLocked()
	concrete := strings.Replace(key, "/channels/{id}", "/channels/"+major, 1)
	if f, ok := s.takeFaultLocked(concrete, key); ok {
		if f.Status == http.StatusTooManyRequests {
			s.write429(w, f.RetryAfter, f.Global, "")
			return
		}
		s.writeErr(w, apiErr{f.Status, f.Code, f.Message})
		return
	}
	// Rate limits per route and channel.
	bk := key + " " + major
	b := s.buckets[bk]
	now := time.Now()
	if b == nil || now.After(b.resetAt) {
		b = &bucket{id: fmt.Sprintf("%x", len(s.buckets)+1) + "abcdef", remaining: s.bucketSize, resetAt: now.Add(s.bucketWin)}
		s.buckets[bk] = b
	}
	if b.remaining <= 0 {
		s.violations++
		s.write429(w, b.resetAt.Sub(now).Seconds(), false, b.id)
		return
	}
	b.remaining--
	after := b.resetAt.Sub(now).Seconds()
	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.Itoa(s.bucketSize))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(b.remaining))
	h.Set("X-RateLimit-Reset", strconv.FormatFloat(float64(b.resetAt.UnixMilli())/1000, 'f', 3, 64))
	h.Set("X-RateLimit-Reset-After", strconv.FormatFloat(math.Ceil(after*1000)/1000, 'f', 3, 64))
	h.Set("X-RateLimit-Bucket", b.id)

	switch {
	case key == "GET /users/@me":
		writeJSON(w, http.StatusOK, s.Bot)
	case key == "GET /gateway/bot":
		writeJSON(w, http.StatusOK, map[string]any{"url": "ws" + strings.TrimPrefix(s.URL, "http"), "shards": 1,
			"session_start_limit": map[string]int{"total": 1000, "remaining": 999, "reset_after": 14400000, "max_concurrency": 1}})
	case key == "POST /channels/{id}/messages" || key == "POST /channels/{id}/messages/":
		s.createMessage(w, r, major)
	case key == "PATCH /channels/{id}/messages/{id}":
		s.editMessage(w, r, major, path[strings.LastIndex(path, "/")+1:])
	case key == "GET /channels/{id}/messages":
		s.listMessages(w, r, major)
	case key == "GET /channels/{id}":
		ch, ok := s.channels[major]
		if !ok {
			s.writeErr(w, apiErr{http.StatusNotFound, 10003, "Unknown Channel"})
			return
		}
		writeJSON(w, http.StatusOK, ch)
	case key == "POST /channels/{id}/typing":
		if _, ok := s.channels[major]; !ok {
			s.writeErr(w, apiErr{http.StatusNotFound, 10003, "Unknown Channel"})
			return
		}
		s.sent = append(s.sent, Sent{Method: "typing", ChannelID: major, At: time.Now()})
		w.WriteHeader(http.StatusNoContent)
	default:
		s.writeErr(w, apiErr{http.StatusNotFound, 0, "404: Not Found"})
	}
}

func (s *Server) write429(w http.ResponseWriter, retryAfter float64, global bool, bucketID string) {
	h := w.Header()
	h.Set("Retry-After", strconv.Itoa(int(math.Ceil(retryAfter))))
	h.Set("X-RateLimit-Limit", strconv.Itoa(s.bucketSize))
	h.Set("X-RateLimit-Remaining", "0")
	h.Set("X-RateLimit-Reset-After", strconv.FormatFloat(retryAfter, 'f', 3, 64))
	if bucketID != "" {
		h.Set("X-RateLimit-Bucket", bucketID)
	}
	scope := "user"
	if global {
		h.Set("X-RateLimit-Global", "true")
		scope = "global"
	}
	h.Set("X-RateLimit-Scope", scope)
	writeJSON(w, http.StatusTooManyRequests, map[string]any{"message": "You are being rate limited.", "retry_after": retryAfter, "global": global})
}

type createBody struct {
	Components       []Component `json:"components"`
	Content          string      `json:"content"`
	MessageReference *Reference  `json:"message_reference"`
	Nonce            any         `json:"nonce"`
}

func (s *Server) createMessage(w http.ResponseWriter, r *http.Request, chID string) {
	ch, ok := s.channels[chID]
	if !ok {
		s.writeErr(w, apiErr{http.StatusNotFound, 10003, "Unknown Channel"})
		return
	}
	var body createBody
	var files []Attachment
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == "multipart/form-data" {
		if err := r.ParseMultipartForm(32 << 20); err != nil {
			s.writeErr(w, apiErr{http.StatusBadRequest, 50109, "The request body contains invalid JSON."})
			return
		}
		if pj := r.MultipartForm.Value["payload_json"]; len(pj) > 0 {
			if err := json.Unmarshal([]byte(pj[0]), &body); err != nil {
				s.writeErr(w, apiErr{http.StatusBadRequest, 50109, "The request body contains invalid JSON."})
				return
			}
		}
		var names []string
		for name := range r.MultipartForm.File {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			for _, fh := range r.MultipartForm.File[name] {
				f, err := fh.Open()
				if err != nil {
					continue
				}
				data, _ := io.ReadAll(f)
				f.Close()
				files = append(files, s.attachmentLocked(chID, fh.Filename, fh.Header.Get("Content-Type"), data))
			}
		}
	} else if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		s.writeErr(w, apiErr{http.StatusBadRequest, 50109, "The request body contains invalid JSON."})
		return
	}
	if body.Content == "" && len(files) == 0 {
		s.writeErr(w, apiErr{http.StatusBadRequest, 50006, "Cannot send an empty message"})
		return
	}
	if msg := checkComponents(body.Components); msg != "" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Invalid Form Body", "code": 50035,
			"errors": map[string]any{"components": map[string]any{"_errors": []map[string]string{{"code": "COMPONENT_INVALID", "message": msg}}}}})
		return
	}
	if utf8.RuneCountInString(body.Content) > MaxContent {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Invalid Form Body", "code": 50035,
			"errors": map[string]any{"content": map[string]any{"_errors": []map[string]string{{"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 2000 or fewer in length."}}}}})
		return
	}
	m := &Message{ID: s.snowflakeLocked(), ChannelID: ch.ID, GuildID: ch.GuildID, Author: s.Bot, Content: body.Content,
		Timestamp: time.Now().UTC().Format(time.RFC3339Nano), Mentions: []User{}, MentionRoles: []string{},
		Attachments: files, Embeds: []any{}, Components: body.Components}
	if files == nil {
		m.Attachments = []Attachment{}
	}
	reply := ""
	if ref := body.MessageReference; ref != nil && ref.MessageID != "" {
		if s.findLocked(ch.ID, ref.MessageID) == nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Invalid Form Body", "code": 50035,
				"errors": map[string]any{"message_reference": map[string]any{"_errors": []map[string]string{{"code": "REPLIES_UNKNOWN_MESSAGE", "message": "Unknown message"}}}}})
			return
		}
		m.Type = 19
		m.Reference = &Reference{MessageID: ref.MessageID, ChannelID: ch.ID, GuildID: ch.GuildID}
		reply = ref.MessageID
	}
	s.addLocked(ch, m)
	s.sent = append(s.sent, Sent{Method: "create", ChannelID: ch.ID, MessageID: m.ID, Content: m.Content, ReplyTo: reply, Files: files, Components: m.Components, At: time.Now()})
	writeJSON(w, http.StatusOK, m)
}

func (s *Server) editMessage(w http.ResponseWriter, r *http.Request, chID, id string) {
	if _, ok := s.channels[chID]; !ok {
		s.writeErr(w, apiErr{http.StatusNotFound, 10003, "Unknown Channel"})
		return
	}
	m := s.findLocked(chID, id)
	if m == nil {
		s.writeErr(w, apiErr{http.StatusNotFound, 10008, "Unknown Message"})
		return
	}
	if m.Author.ID != s.Bot.ID {
		s.writeErr(w, apiErr{http.StatusForbidden, 50005, "Cannot edit a message authored by another user"})
		return
	}
	var body struct {
		Content    *string      `json:"content"`
		Components *[]Component `json:"components"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		s.writeErr(w, apiErr{http.StatusBadRequest, 50109, "The request body contains invalid JSON."})
		return
	}
	if body.Components != nil {
		if msg := checkComponents(*body.Components); msg != "" {
			writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Invalid Form Body", "code": 50035})
			return
		}
		m.Components = *body.Components
	}
	if body.Content != nil {
		if utf8.RuneCountInString(*body.Content) > MaxContent {
			writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Invalid Form Body", "code": 50035})
			return
		}
		m.Content = *body.Content
	}
	ts := time.Now().UTC().Format(time.RFC3339Nano)
	m.EditedTimestamp = &ts
	s.sent = append(s.sent, Sent{Method: "edit", ChannelID: chID, MessageID: id, Content: m.Content, Components: m.Components, At: time.Now()})
	s.dispatchLocked("MESSAGE_UPDATE", m)
	writeJSON(w, http.StatusOK, m)
}

// listMessages is GET /channels/{id}/messages: newest first; after= gives
// the oldest limit messages after the id (still newest first).
func (s *Server) listMessages(w http.ResponseWriter, r *http.Request, chID string) {
	if _, ok := s.channels[chID]; !ok {
		s.writeErr(w, apiErr{http.StatusNotFound, 10003, "Unknown Channel"})
		return
	}
	q := r.URL.Query()
	limit := 50
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 100 {
			writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Invalid Form Body", "code": 50035})
			return
		}
		limit = n
	}
	all := s.msgs[chID]
	var sel []*Message
	switch {
	case q.Get("after") != "":
		after := q.Get("after")
		for _, m := range all {
			if snowLess(after, m.ID) {
				sel = append(sel, m)
				if len(sel) == limit {
					break
				}
			}
		}
	case q.Get("before") != "":
		before := q.Get("before")
		for i := len(all) - 1; i >= 0 && len(sel) < limit; i-- {
			if snowLess(all[i].ID, before) {
				sel = append([]*Message{all[i]}, sel...)
			}
		}
	default:
		start := max(0, len(all)-limit)
		sel = all[start:]
	}
	out := make([]Message, 0, len(sel))
	for i := len(sel) - 1; i >= 0; i-- {
		out = append(out, s.viewLocked(*sel[i]))
	}
	writeJSON(w, http.StatusOK, out)
}

func snowLess(a, b string) bool {
	x, _ := strconv.ParseUint(a, 10, 64)
	y, _ := strconv.ParseUint(b, 10, 64)
	return x < y
}

// viewLocked is a message as the bot may see it: without the
// MESSAGE_CONTENT intent enabled, guild messages that do not mention the
// bot come without content and attachments (REST too).
func (s *Server) viewLocked(m Message) Message {
	if s.PrivilegedContent || m.GuildID == "" || m.Author.ID == s.Bot.ID {
		return m
	}
	for _, u := range m.Mentions {
		if u.ID == s.Bot.ID {
			return m
		}
	}
	m.Content, m.Attachments = "", []Attachment{}
	return m
}

func (s *Server) attachmentLocked(chID, name, contentType string, data []byte) Attachment {
	id := s.snowflakeLocked()
	u := s.URL + "/attachments/" + chID + "/" + id + "/" + name
	a := &Attachment{ID: id, Filename: name, Size: len(data), URL: u, ProxyURL: u, ContentType: contentType, data: data}
	s.files[id] = a
	return *a
}

// serveAttachment is the CDN: no authorization needed.
func (s *Server) serveAttachment(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	a, ok := s.files[r.PathValue("id")]
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	if a.ContentType != "" {
		w.Header().Set("Content-Type", a.ContentType)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(a.data)))
	_, _ = w.Write(a.data)
}

// checkComponents checks message components as Discord does: at most 5
// action rows (type 1) of at most 5 buttons (type 2) each; a button has a
// label of at most 80 characters and a custom_id of 1-100 (or a URL, not
// modelled). It returns the problem, or "".
func checkComponents(rows []Component) string {
	if len(rows) > 5 {
		return "Must be 5 or fewer in length."
	}
	for _, r := range rows {
		if r.Type != 1 || len(r.Components) == 0 || len(r.Components) > 5 {
			return "Invalid action row."
		}
		for _, b := range r.Components {
			if b.Type != 2 || b.Label == "" || utf8.RuneCountInString(b.Label) > 80 || b.CustomID == "" || len(b.CustomID) > 100 || b.Style < 1 || b.Style > 4 {
				return "Invalid button."
			}
		}
	}
	return ""
}

// interactionCallback is POST /interactions/{id}/{token}/callback: the
// answer to a button press, once (type 4: a message, ephemeral with flag
// 64; 6: acknowledged, no change; 7: the pressed message updated).
func (s *Server) interactionCallback(w http.ResponseWriter, r *http.Request, path string) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) != 4 || parts[3] != "callback" {
		s.writeErr(w, apiErr{http.StatusNotFound, 0, "404: Not Found"})
		return
	}
	var body struct {
		Type int `json:"type"`
		Data *struct {
			Content    string       `json:"content"`
			Flags      int          `json:"flags"`
			Components *[]Component `json:"components"`
		} `json:"data"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		s.writeErr(w, apiErr{http.StatusBadRequest, 50109, "The request body contains invalid JSON."})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.interactions[parts[2]]
	switch {
	case !ok:
		s.writeErr(w, apiErr{http.StatusNotFound, 10062, "Unknown interaction"})
		return
	case in.answered:
		s.writeErr(w, apiErr{http.StatusBadRequest, 40060, "Interaction has already been acknowledged."})
		return
	}
	sent := Sent{Method: "interaction", ChannelID: in.channel, MessageID: in.message, At: time.Now()}
	switch body.Type {
	case 4:
		if body.Data == nil || body.Data.Content == "" {
			s.writeErr(w, apiErr{http.StatusBadRequest, 50006, "Cannot send an empty message"})
			return
		}
		sent.Content, sent.Ephemeral = body.Data.Content, body.Data.Flags&64 != 0
	case 6:
	case 7:
		m := s.findLocked(in.channel, in.message)
		if m != nil && body.Data != nil {
			if body.Data.Content != "" {
				m.Content = body.Data.Content
			}
			if body.Data.Components != nil {
				m.Components = *body.Data.Components
			}
			sent.Content, sent.Components = m.Content, m.Components
		}
	default:
		s.writeErr(w, apiErr{http.StatusBadRequest, 50035, "Invalid Form Body"})
		return
	}
	in.answered = true
	s.sent = append(s.sent, sent)
	s.notifyLocked()
	w.WriteHeader(http.StatusNoContent)
}
