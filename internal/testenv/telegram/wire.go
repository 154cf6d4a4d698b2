package telegram

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
)

type envelope struct {
	OK          bool        `json:"ok"`
	Result      any         `json:"result,omitempty"`
	ErrorCode   int         `json:"error_code,omitempty"`
	Description string      `json:"description,omitempty"`
	Parameters  *parameters `json:"parameters,omitempty"`
}

type parameters struct {
	RetryAfter      int   `json:"retry_after,omitempty"`
	MigrateToChatID int64 `json:"migrate_to_chat_id,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v envelope) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeOK(w http.ResponseWriter, result any) {
	writeJSON(w, http.StatusOK, envelope{OK: true, Result: result})
}

func writeError(w http.ResponseWriter, status int, desc string, retryAfter int) {
	e := envelope{ErrorCode: status, Description: desc}
	if retryAfter > 0 {
		e.Parameters = &parameters{RetryAfter: retryAfter}
	}
	writeJSON(w, status, e)
}

func badRequest(w http.ResponseWriter, desc string) {
	writeError(w, http.StatusBadRequest, "Bad Request: "+desc, 0)
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if rest, ok := strings.CutPrefix(r.URL.Path, "/file/bot"); ok {
		s.serveFile(w, rest)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/bot")
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found", 0)
		return
	}
	token, method, _ := strings.Cut(rest, "/")
	if token != s.Token {
		writeError(w, http.StatusUnauthorized, "Unauthorized", 0)
		return
	}
	params, files, err := readParams(r)
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	s.mu.Lock()
	s.calls = append(s.calls, Call{Method: method, Params: params, Files: files, At: time.Now()})
	f, faulty := s.takeFaultLocked(method)
	s.notifyLocked()
	s.mu.Unlock()
	if faulty {
		writeError(w, f.Status, f.Description, f.RetryAfter)
		return
	}
	if s.hang(r, method, params) {
		writeError(w, http.StatusBadGateway, "Bad Gateway", 0)
		return
	}
	p := reqParams(params)
	switch strings.ToLower(method) {
	case "getme":
		writeOK(w, s.Bot)
	case "getupdates":
		s.getUpdates(w, r, p)
	case "sendmessage":
		s.sendMessage(w, p)
	case "editmessagetext":
		s.editMessageText(w, p)
	case "answercallbackquery":
		s.answerCallbackQuery(w, p)
	case "deletemessage":
		s.deleteMessage(w, p)
	case "sendchataction":
		s.sendChatAction(w, p)
	case "setmycommands":
		s.setMyCommands(w, p)
	case "getmycommands":
		writeOK(w, s.Commands())
	case "getfile":
		s.getFile(w, p)
	case "senddocument":
		s.sendDocument(w, p, files)
	case "sendphoto":
		s.sendPhoto(w, p, files)
	case "sendmediagroup":
		s.sendMediaGroup(w, p, files)
	case "deletewebhook":
		writeOK(w, true)
	case "getwebhookinfo":
		writeOK(w, map[string]any{"url": "", "has_custom_certificate": false, "pending_update_count": s.Pending()})
	default:
		writeError(w, http.StatusNotFound, "Not Found", 0)
	}
}

// readParams reads a request's parameters from the query string and the
// body (JSON object, multipart form or urlencoded form). Non-string JSON
// values are kept as their JSON text, as the real server accepts both.
func readParams(r *http.Request) (map[string]string, map[string]Upload, error) {
	params := map[string]string{}
	for k, v := range r.URL.Query() {
		params[k] = v[0]
	}
	files := map[string]Upload{}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, nil, err
		}
		if len(strings.TrimSpace(string(body))) == 0 {
			break
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, nil, fmt.Errorf("can't parse JSON object")
		}
		for k, v := range m {
			var s string
			if json.Unmarshal(v, &s) == nil {
				params[k] = s
			} else if string(v) != "null" {
				params[k] = string(v)
			}
		}
	case "multipart/form-data":
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, nil, err
		}
		if len(body) == 0 {
			break // a method without parameters, as some clients send it
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if err := r.ParseMultipartForm(64 << 20); err != nil {
			return nil, nil, fmt.Errorf("can't parse multipart form: %v", err)
		}
		for k, v := range r.MultipartForm.Value {
			params[k] = v[0]
		}
		for k, fhs := range r.MultipartForm.File {
			f, err := fhs[0].Open()
			if err != nil {
				return nil, nil, err
			}
			data, err := io.ReadAll(f)
			f.Close()
			if err != nil {
				return nil, nil, err
			}
			files[k] = Upload{Name: fhs[0].Filename, Data: data}
		}
	case "application/x-www-form-urlencoded":
		if err := r.ParseForm(); err != nil {
			return nil, nil, err
		}
		for k, v := range r.PostForm {
			params[k] = v[0]
		}
	}
	return params, files, nil
}

type reqParams map[string]string

func (p reqParams) int(name string) (int64, bool) {
	v, ok := p[name]
	if !ok || v == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

func (p reqParams) bool(name string) bool { return p[name] == "true" || p[name] == "1" }
