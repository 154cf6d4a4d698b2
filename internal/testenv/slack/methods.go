package slack

import (
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Fault is an error the server answers instead of handling a request.
type Fault struct {
	// Error is Slack's error string ("ratelimited", "internal_error", …).
	Error string
	// Status is the HTTP status: 200 for ordinary errors, 429 with
	// RetryAfter for rate limits, 5xx for outages.
	Status int
	// RetryAfter is the Retry-After header in seconds (429).
	RetryAfter int
	// Times is how many requests get the fault (0 means 1).
	Times int
}

// RateLimited is Slack's 429 answer.
func RateLimited(retryAfter int) Fault {
	return Fault{Status: http.StatusTooManyRequests, Error: "ratelimited", RetryAfter: retryAfter}
}

// Fail makes the next f.Times requests of method ("*" for any) fail with f.
func (s *Server) Fail(method string, f Fault) {
	if f.Times <= 0 {
		f.Times = 1
	}
	if f.Status == 0 {
		f.Status = http.StatusOK
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[method] = append(s.faults[method], f)
}

func (s *Server) takeFaultLocked(method string) (Fault, bool) {
	for _, m := range []string{method, "*"} {
		q := s.faults[m]
		if len(q) == 0 {
			continue
		}
		f := q[0]
		q[0].Times--
		if q[0].Times <= 0 {
			s.faults[m] = q[1:]
		}
		return f, true
	}
	return Fault{}, false
}

type result map[string]any

// params reads a request's arguments: query string, urlencoded or
// multipart form, or a JSON object (values as strings; objects and arrays
// kept as JSON text).
func params(r *http.Request) (map[string]string, error) {
	p := map[string]string{}
	for k, v := range r.URL.Query() {
		p[k] = v[0]
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		var m map[string]json.RawMessage
		body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
		if err != nil {
			return nil, err
		}
		if len(body) > 0 {
			if err := json.Unmarshal(body, &m); err != nil {
				return nil, err
			}
		}
		for k, raw := range m {
			var s string
			if json.Unmarshal(raw, &s) == nil {
				p[k] = s
			} else {
				p[k] = string(raw)
			}
		}
	case "multipart/form-data":
		if err := r.ParseMultipartForm(32 << 20); err != nil {
			return nil, err
		}
		for k, v := range r.MultipartForm.Value {
			p[k] = v[0]
		}
	default:
		if err := r.ParseForm(); err != nil {
			return nil, err
		}
		for k, v := range r.PostForm {
			p[k] = v[0]
		}
	}
	return p, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, e string) {
	writeJSON(w, http.StatusOK, result{"ok": false, "error": e})
}

// tokenOf is the Bearer header's token, else the token parameter.
func tokenOf(r *http.Request, p map[string]string) string {
	if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(t)
	}
	return p["token"]
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	method := r.PathValue("method")
	if r.Method != http.MethodPost && r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	p, err := params(r)
	if err != nil {
		fail(w, "invalid_form_data")
		return
	}
	token := tokenOf(r, p)
	s.mu.Lock()
	defer s.mu.Unlock()
	cp := map[string]string{}
	for k, v := range p {
		if k != "token" {
			cp[k] = v
		}
	}
	s.calls = append(s.calls, Call{Method: method, Params: cp, At: time.Now()})
	s.notifyLocked()
	if f, ok := s.takeFaultLocked(method); ok {
		if f.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(f.RetryAfter))
		}
		writeJSON(w, f.Status, result{"ok": false, "error": f.Error})
		return
	}
	switch {
	case token == "":
		fail(w, "not_authed")
		return
	case method == "apps.connections.open":
		if token != s.AppToken {
			if token == s.BotToken {
				fail(w, "not_allowed_token_type")
			} else {
				fail(w, "invalid_auth")
			}
			return
		}
		ticket := randomHex(16)
		s.tickets[ticket] = true
		wsURL := "ws" + strings.TrimPrefix(s.URL, "http") + "/link/?ticket=" + ticket + "&app_id=" + s.AppID
		writeJSON(w, http.StatusOK, result{"ok": true, "url": wsURL})
		return
	case token == s.AppToken:
		fail(w, "not_allowed_token_type")
		return
	case token != s.BotToken:
		fail(w, "invalid_auth")
		return
	}
	h, ok := methods[method]
	if !ok {
		fail(w, "unknown_method")
		return
	}
	res, errStr := h(s, p)
	if errStr != "" {
		fail(w, errStr)
		return
	}
	res["ok"] = true
	writeJSON(w, http.StatusOK, res)
}

var methods = map[string]func(s *Server, p map[string]string) (result, string){
	"auth.test":                    (*Server).authTest,
	"users.info":                   (*Server).usersInfo,
	"chat.postMessage":             (*Server).postMessage,
	"chat.update":                  (*Server).update,
	"chat.postEphemeral":           (*Server).postEphemeral,
	"reactions.add":                (*Server).reactionsAdd,
	"reactions.remove":             (*Server).reactionsRemove,
	"files.getUploadURLExternal":   (*Server).getUploadURL,
	"files.completeUploadExternal": (*Server).completeUpload,
}

func (s *Server) authTest(map[string]string) (result, string) {
	return result{"url": "https://conch-test.slack.com/", "team": "Conch Test", "user": s.Bot.Name,
		"team_id": s.TeamID, "user_id": s.Bot.ID, "bot_id": s.BotID, "is_enterprise_install": false}, ""
}

func (s *Server) usersInfo(p map[string]string) (result, string) {
	u, ok := s.users[p["user"]]
	if !ok {
		return nil, "user_not_found"
	}
	return result{"user": map[string]any{"id": u.ID, "team_id": u.Team, "name": u.Name, "real_name": u.Real,
		"is_bot": u.IsBot, "profile": map[string]any{"real_name": u.Real, "display_name": u.Name}}}, ""
}

func (s *Server) postMessage(p map[string]string) (result, string) {
	ch, ok := s.channels[p["channel"]]
	if !ok {
		return nil, "channel_not_found"
	}
	text := p["text"]
	if text == "" && p["blocks"] == "" && p["attachments"] == "" {
		return nil, "no_text"
	}
	if utf8.RuneCountInString(text) > MaxTextLen {
		return nil, "msg_too_long"
	}
	if p["thread_ts"] != "" && s.findLocked(ch.ID, p["thread_ts"]) == nil {
		return nil, "thread_not_found"
	}
	mrkdwn := p["mrkdwn"] != "false"
	blocks, bad := parseBlocks(p)
	if bad != "" {
		return nil, bad
	}
	m := &Message{Type: "message", User: s.Bot.ID, BotID: s.BotID, AppID: s.AppID, Team: s.TeamID, Text: text,
		TS: s.tsLocked(), ThreadTS: p["thread_ts"], Blocks: blocks}
	if !mrkdwn {
		f := false
		m.Mrkdwn = &f
	}
	s.addLocked(ch, m)
	s.sent = append(s.sent, Sent{Method: "chat.postMessage", Channel: ch.ID, TS: m.TS, ThreadTS: m.ThreadTS, Text: text, Mrkdwn: mrkdwn, Blocks: blocks, At: time.Now()})
	s.notifyLocked()
	return result{"channel": ch.ID, "ts": m.TS, "message": m}, ""
}

// postEphemeral shows a message to one user of a channel; it is not
// stored in the channel's history.
func (s *Server) postEphemeral(p map[string]string) (result, string) {
	ch, ok := s.channels[p["channel"]]
	if !ok {
		return nil, "channel_not_found"
	}
	if _, ok := s.users[p["user"]]; !ok {
		return nil, "user_not_found"
	}
	if p["text"] == "" && p["blocks"] == "" {
		return nil, "no_text"
	}
	ts := s.tsLocked()
	s.sent = append(s.sent, Sent{Method: "chat.postEphemeral", Channel: ch.ID, TS: ts, ThreadTS: p["thread_ts"], Text: p["text"], User: p["user"], At: time.Now()})
	s.notifyLocked()
	return result{"message_ts": ts}, ""
}

func (s *Server) update(p map[string]string) (result, string) {
	ch, ok := s.channels[p["channel"]]
	if !ok {
		return nil, "channel_not_found"
	}
	m := s.findLocked(ch.ID, p["ts"])
	if m == nil {
		return nil, "message_not_found"
	}
	if m.User != s.Bot.ID {
		return nil, "cant_update_message"
	}
	text := p["text"]
	if text == "" && p["blocks"] == "" {
		return nil, "no_text"
	}
	if utf8.RuneCountInString(text) > MaxTextLen {
		return nil, "msg_too_long"
	}
	blocks, bad := parseBlocks(p)
	if bad != "" {
		return nil, bad
	}
	m.Text = text
	if _, ok := p["blocks"]; ok {
		// Without the field the blocks stay; "[]" removes them.
		m.Blocks = blocks
	}
	m.Edited = &Edited{User: s.Bot.ID, TS: s.tsLocked()}
	s.sent = append(s.sent, Sent{Method: "chat.update", Channel: ch.ID, TS: m.TS, ThreadTS: m.ThreadTS, Text: text, Mrkdwn: p["mrkdwn"] != "false", Blocks: blocks, At: time.Now()})
	s.notifyLocked()
	return result{"channel": ch.ID, "ts": m.TS, "text": text, "message": m}, ""
}

// parseBlocks reads the blocks parameter: a JSON array of blocks, each
// with a type; buttons of actions blocks need a plain_text text, an
// action_id of at most 255 characters and a value of at most 2000, as
// Slack checks ("invalid_blocks" otherwise). An empty array is nil.
func parseBlocks(p map[string]string) (json.RawMessage, string) {
	raw, ok := p["blocks"]
	if !ok || raw == "" {
		return nil, ""
	}
	var blocks []struct {
		Type     string `json:"type"`
		BlockID  string `json:"block_id"`
		Elements []struct {
			Type     string `json:"type"`
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
			Text     *struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"text"`
		} `json:"elements"`
	}
	if err := json.Unmarshal([]byte(raw), &blocks); err != nil {
		return nil, "invalid_blocks_format"
	}
	if len(blocks) > 50 {
		return nil, "invalid_blocks"
	}
	for _, b := range blocks {
		if b.Type == "" || len(b.BlockID) > 255 {
			return nil, "invalid_blocks"
		}
		for _, e := range b.Elements {
			if e.Type != "button" {
				continue
			}
			if e.Text == nil || e.Text.Type != "plain_text" || e.Text.Text == "" || len(e.ActionID) > 255 || len(e.Value) > 2000 {
				return nil, "invalid_blocks"
			}
		}
	}
	if len(blocks) == 0 {
		return nil, ""
	}
	return json.RawMessage(raw), ""
}

func (s *Server) reactionsAdd(p map[string]string) (result, string) {
	return s.react(p, true)
}

func (s *Server) reactionsRemove(p map[string]string) (result, string) {
	return s.react(p, false)
}

func (s *Server) react(p map[string]string, add bool) (result, string) {
	if p["name"] == "" {
		return nil, "invalid_name"
	}
	ch, ok := s.channels[p["channel"]]
	if !ok {
		return nil, "channel_not_found"
	}
	m := s.findLocked(ch.ID, p["timestamp"])
	if m == nil {
		return nil, "message_not_found"
	}
	name := strings.Trim(p["name"], ":")
	i := -1
	for j, r := range m.Reactions {
		if r.Name == name {
			i = j
		}
	}
	method := "reactions.add"
	if add {
		if i >= 0 {
			return nil, "already_reacted"
		}
		m.Reactions = append(m.Reactions, Reaction{Name: name, Users: []string{s.Bot.ID}, Count: 1})
	} else {
		if i < 0 {
			return nil, "no_reaction"
		}
		m.Reactions = append(m.Reactions[:i], m.Reactions[i+1:]...)
		method = "reactions.remove"
	}
	s.sent = append(s.sent, Sent{Method: method, Channel: ch.ID, TS: m.TS, ThreadTS: m.ThreadTS, Reaction: name, At: time.Now()})
	s.notifyLocked()
	return result{}, ""
}

func (s *Server) getUploadURL(p map[string]string) (result, string) {
	n, err := strconv.Atoi(p["length"])
	if p["filename"] == "" || err != nil || n <= 0 {
		return nil, "invalid_arguments"
	}
	id := s.idLocked("F")
	s.files[id] = &File{ID: id, Name: p["filename"], Title: p["filename"], Size: n}
	return result{"upload_url": s.URL + "/upload/" + id, "file_id": id}, ""
}

func (s *Server) completeUpload(p map[string]string) (result, string) {
	var fs []struct {
		ID    string `json:"id"`
		Title string `json:"title"`
	}
	if err := json.Unmarshal([]byte(p["files"]), &fs); err != nil || len(fs) == 0 {
		return nil, "invalid_arguments"
	}
	var ch *channelInfo
	if id := p["channel_id"]; id != "" {
		var ok bool
		if ch, ok = s.channels[id]; !ok {
			return nil, "channel_not_found"
		}
	}
	var out []map[string]string
	var files []File
	for _, f := range fs {
		file, ok := s.files[f.ID]
		if !ok || file.data == nil {
			return nil, "file_not_found"
		}
		if f.Title != "" {
			file.Title = f.Title
		}
		files = append(files, *file)
		out = append(out, map[string]string{"id": file.ID, "title": file.Title})
	}
	if ch != nil {
		m := &Message{Type: "message", User: s.Bot.ID, BotID: s.BotID, Team: s.TeamID, Text: p["initial_comment"],
			TS: s.tsLocked(), ThreadTS: p["thread_ts"], Files: files}
		s.addLocked(ch, m)
		for i := range files {
			s.sent = append(s.sent, Sent{Method: "files.completeUploadExternal", Channel: ch.ID, TS: m.TS, ThreadTS: m.ThreadTS,
				Text: m.Text, File: &files[i], At: time.Now()})
		}
		s.notifyLocked()
	}
	return result{"files": out}, ""
}

// serveUpload takes a file's bytes (raw body or multipart "file").
func (s *Server) serveUpload(w http.ResponseWriter, r *http.Request) {
	var data []byte
	var err error
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct == "multipart/form-data" {
		f, _, ferr := r.FormFile("file")
		if ferr != nil {
			http.Error(w, "no file", http.StatusBadRequest)
			return
		}
		defer f.Close()
		data, err = io.ReadAll(f)
	} else {
		data, err = io.ReadAll(r.Body)
	}
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.files[r.PathValue("id")]
	if !ok {
		http.Error(w, "unknown upload", http.StatusNotFound)
		return
	}
	f.data = data
	f.Size = len(data)
	w.Header().Set("Content-Type", "text/plain")
	_, _ = io.WriteString(w, "OK - "+strconv.Itoa(len(data)))
}

// serveFile is url_private_download: the bot token as Bearer header.
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	f, ok := s.files[r.PathValue("id")]
	authed := r.Header.Get("Authorization") == "Bearer "+s.BotToken
	s.mu.Unlock()
	if !authed {
		// Slack answers an HTML login page, not an error code.
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<html><body>Sign in to Slack</body></html>")
		return
	}
	if !ok || f.data == nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", f.Mimetype)
	w.Header().Set("Content-Length", strconv.Itoa(len(f.data)))
	_, _ = w.Write(f.data)
}
