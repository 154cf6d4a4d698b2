package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"conch"
)

// cookieName is the session cookie.
const cookieName = "conch_session"

// tokenHeader carries a session's request token on API calls; a WebSocket
// carries it as the subprotocol tokenProtocolPrefix+token, beside
// socketProtocol (the one the server picks). See Auth.
const (
	tokenHeader         = "X-Conch-Token"
	socketProtocol      = "conch"
	tokenProtocolPrefix = "conch-token."
)

// requestToken is the request token a request carries.
func requestToken(r *http.Request) string {
	if t := r.Header.Get(tokenHeader); t != "" {
		return t
	}
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(v, ",") {
			if t, ok := strings.CutPrefix(strings.TrimSpace(p), tokenProtocolPrefix); ok {
				return t
			}
		}
	}
	return ""
}

// loginPage hands the page its session's request token, once: it stores it
// in its origin's localStorage and goes on to next (replacing this entry of
// the history, so the login link is not kept). Programs read the token
// from the X-Conch-Token header of the same answer.
const loginPage = `<!doctype html><meta charset="utf-8"><meta name="referrer" content="no-referrer"><title>conch: login</title>
<meta name="conch-token" content="%s"><meta name="conch-next" content="%s">
<link rel="stylesheet" href="/static/style.css"><main class="login"><h1>conch</h1><p>Logging in…</p></main>
<script src="/static/login.js"></script>
`

// login redeems the token of a login link, sets the session cookie and
// answers with a page that keeps the request token and goes on to the chat
// (or the dashboard) without the login token in the address.
func (c *Channel) login(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	tok := r.URL.Query().Get("token")
	sess, err := c.auth.Redeem(r.Context(), tok)
	if err != nil {
		status := http.StatusUnauthorized
		msg := ErrLogin.Error()
		if !errors.Is(err, ErrLogin) {
			c.log.Error("login", "err", err)
			status, msg = http.StatusInternalServerError, "login failed; see conch's log"
		} else {
			c.log.Warn("refused login link", "remote", r.RemoteAddr)
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(status)
		fmt.Fprintf(w, `<!doctype html><meta charset="utf-8"><title>conch: login</title><link rel="stylesheet" href="/static/style.css"><main class="login"><h1>conch</h1><p>%s</p></main>`, htmlEscape(msg))
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: sess.Cookie, Path: "/", Expires: sess.Expires,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.opts.Secure,
	})
	c.log.Info("web login", "remote", r.RemoteAddr)
	next := r.URL.Query().Get("next")
	if next != "/dashboard" {
		next = "/"
	}
	w.Header().Set(tokenHeader, sess.Token)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, loginPage, htmlEscape(sess.Token), htmlEscape(next))
}

// logout ends this session on the server (its cookie and token stop
// working everywhere, open sockets close at their next check) and clears
// the cookie.
func (c *Channel) logout(w http.ResponseWriter, r *http.Request) {
	if err := c.auth.Logout(r.Context(), sessionCookie(r)); err != nil {
		c.writeErr(w, "logout", err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.opts.Secure})
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
}

// api wraps an API handler: a live session is required (its cookie and its
// request token), and a request that changes something must come from the
// page's own origin.
func (c *Channel) api(h http.HandlerFunc) http.Handler {
	return c.secure(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		ok, err := c.auth.Check(r.Context(), sessionCookie(r), requestToken(r))
		if err != nil {
			c.log.Error("check session", "err", err)
		}
		if !ok {
			writeError(w, http.StatusUnauthorized, "not logged in: open the link printed by `conch web url`")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !sameOrigin(r, c.opts.OriginPatterns) {
			writeError(w, http.StatusForbidden, "cross-origin request refused")
			return
		}
		h(w, r)
	}))
}

// sameOrigin reports whether a request's Origin (or, without one, its
// Referer) names the host it was sent to or an allowed one.
func sameOrigin(r *http.Request, extra []string) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		o = r.Header.Get("Referer")
	}
	if o == "" {
		// Not from a browser page (a browser always sends Origin on
		// POST, PATCH and DELETE); the session cookie still had to match.
		return true
	}
	u, err := url.Parse(o)
	if err != nil {
		return false
	}
	return strings.EqualFold(u.Host, r.Host) || slices.ContainsFunc(extra, func(h string) bool { return strings.EqualFold(h, u.Host) })
}

type apiError struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, apiError{Error: msg})
}

// writeErr answers with err's kind and user-safe text; detail goes to the log.
func (c *Channel) writeErr(w http.ResponseWriter, op string, err error) {
	status := http.StatusInternalServerError
	switch conch.KindOf(err) {
	case conch.KindInvalid:
		status = http.StatusBadRequest
	case conch.KindNotFound:
		status = http.StatusNotFound
	case conch.KindUnavailable:
		status = http.StatusServiceUnavailable
	}
	if status == http.StatusInternalServerError {
		c.log.Error(op, "err", err)
	}
	writeError(w, status, conch.UserMessage(err))
}

func readJSON(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		return conch.Errorf(conch.KindInvalid, "could not read the request")
	}
	if err := json.Unmarshal(b, v); err != nil {
		return conch.Errorf(conch.KindInvalid, "the request is not valid JSON")
	}
	return nil
}

// conversationView is a web conversation with its state.
type conversationView struct {
	Conversation
	LastMessage string                  `json:"last_message,omitempty"`
	LastAt      time.Time               `json:"last_at,omitzero"`
	State       conch.ConversationState `json:"state,omitempty"`
	Pending     int                     `json:"pending,omitempty"`
	LastSeq     int64                   `json:"last_seq"`
}

func (c *Channel) listConversations(w http.ResponseWriter, r *http.Request) {
	list, err := c.convs.List(r.Context())
	if err != nil {
		c.writeErr(w, "list conversations", err)
		return
	}
	sums := map[string]conch.ConversationSummary{}
	if c.opts.Read != nil && len(list) > 0 {
		// Only the listed ones: the page asks every 10 s, and the store has
		// every channel's conversations.
		keys := make([]conch.ConversationKey, len(list))
		for i, cv := range list {
			keys[i] = cv.Key()
		}
		some, err := c.opts.Read.ConversationSummaries(r.Context(), keys...)
		if err != nil {
			c.log.Warn("conversation summaries", "err", err)
		}
		for _, s := range some {
			if s.Key.Channel == conch.ChannelWeb {
				sums[s.Key.ID] = s
			}
		}
	}
	out := make([]conversationView, 0, len(list))
	for _, cv := range list {
		v := conversationView{Conversation: cv}
		if s, ok := sums[cv.ID]; ok {
			v.LastMessage, v.LastAt, v.State, v.Pending = clip(s.LastMessage, 200), s.LastAt, s.State, s.Pending
		}
		v.LastSeq, _ = c.opts.Events.LastSeq(r.Context(), cv.Key())
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, out)
}

func (c *Channel) createConversation(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Title string `json:"title"`
	}
	if r.ContentLength != 0 {
		if err := readJSON(r, &req); err != nil {
			c.writeErr(w, "create conversation", err)
			return
		}
	}
	cv, err := c.convs.Create(r.Context(), req.Title)
	if err != nil {
		c.writeErr(w, "create conversation", err)
		return
	}
	writeJSON(w, http.StatusCreated, cv)
}

func (c *Channel) renameConversation(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Title string `json:"title"`
	}
	if err := readJSON(r, &req); err != nil {
		c.writeErr(w, "rename conversation", err)
		return
	}
	cv, err := c.convs.Rename(r.Context(), r.PathValue("id"), req.Title)
	if err != nil {
		c.writeErr(w, "rename conversation", err)
		return
	}
	writeJSON(w, http.StatusOK, cv)
}

// deleteConversation resets the conversation (its history is forgotten
// and its computer removed, as /reset does) and drops it from the list.
func (c *Channel) deleteConversation(w http.ResponseWriter, r *http.Request) {
	cv, err := c.convs.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		c.writeErr(w, "delete conversation", err)
		return
	}
	if err := c.opts.Control.Reset(r.Context(), cv.Key()); err != nil {
		c.writeErr(w, "delete conversation", err)
		return
	}
	if err := c.convs.Delete(r.Context(), cv.ID); err != nil {
		c.writeErr(w, "delete conversation", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
}

// summaryView is a conversation of any channel on the dashboard.
type summaryView struct {
	conch.ConversationSummary
	Key     string `json:"key"`
	Channel string `json:"channel"`
}

// sandboxView is a sandbox with its resource use and terminals.
type sandboxView struct {
	conch.SandboxInfo
	Stats      *conch.SandboxStats `json:"stats,omitempty"`
	StatsError string              `json:"stats_error,omitempty"`
	Terminals  []int               `json:"terminals"`
}

type dashboardView struct {
	Conversations []summaryView `json:"conversations"`
	Sandboxes     []sandboxView `json:"sandboxes"`
	// MCP lists the MCP servers (empty without any).
	MCP    []conch.MCPServerStatus `json:"mcp"`
	Errors []string                `json:"errors,omitempty"`
	At     time.Time               `json:"at"`
}

// dashboard is every conversation of every channel and every sandbox.
func (c *Channel) dashboard(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	v := dashboardView{Conversations: []summaryView{}, Sandboxes: []sandboxView{}, MCP: []conch.MCPServerStatus{}, At: c.opts.Now().UTC()}
	if c.opts.MCP != nil {
		v.MCP = append(v.MCP, c.opts.MCP()...)
	}
	if c.opts.Read != nil {
		sums, err := c.opts.Read.ConversationSummaries(ctx)
		if err != nil {
			c.log.Warn("dashboard: conversations", "err", err)
			v.Errors = append(v.Errors, "conversations: "+conch.UserMessage(err))
		}
		for _, s := range sums {
			s.LastMessage = clip(s.LastMessage, 300)
			v.Conversations = append(v.Conversations, summaryView{ConversationSummary: s, Key: s.Key.String(), Channel: string(s.Key.Channel)})
		}
	}
	if c.opts.Sandboxes != nil {
		infos, err := c.opts.Sandboxes.Sandboxes(ctx)
		if err != nil {
			c.log.Warn("dashboard: sandboxes", "err", err)
			v.Errors = append(v.Errors, "sandboxes: "+conch.UserMessage(err))
		}
		v.Sandboxes = make([]sandboxView, len(infos))
		var wg sync.WaitGroup
		for i, in := range infos {
			v.Sandboxes[i] = sandboxView{SandboxInfo: in, Terminals: []int{}}
			if !in.Running || in.Key.IsZero() {
				continue
			}
			wg.Go(func() {
				sv := &v.Sandboxes[i]
				st, err := c.opts.Sandboxes.SandboxStats(ctx, in.Key)
				if err != nil {
					sv.StatsError = conch.UserMessage(err)
				} else {
					sv.Stats = &st
				}
				if c.opts.Terminals != nil {
					if ts, err := c.opts.Terminals.Terminals(ctx, in.Key); err == nil {
						sv.Terminals = ts
					} else {
						c.log.Debug("dashboard: terminals", "conversation", in.Key.String(), "err", err)
					}
				}
			})
		}
		wg.Wait()
	}
	writeJSON(w, http.StatusOK, v)
}

// audit returns audit records after ?after= (the newest 100 without it).
func (c *Channel) audit(w http.ResponseWriter, r *http.Request) {
	if c.opts.Read == nil {
		writeJSON(w, http.StatusOK, []conch.AuditRecord{})
		return
	}
	after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	const limit = 100
	recs, err := c.opts.Read.AuditSince(r.Context(), after, 100000)
	if err != nil {
		c.writeErr(w, "audit", err)
		return
	}
	if len(recs) > limit {
		recs = recs[len(recs)-limit:]
	}
	if recs == nil {
		recs = []conch.AuditRecord{}
	}
	type view struct {
		conch.AuditRecord
		Conversation string `json:"conversation"`
	}
	out := make([]view, len(recs))
	for i, rec := range recs {
		out[i] = view{AuditRecord: rec}
		if !rec.Conversation.IsZero() {
			out[i].Conversation = rec.Conversation.String()
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// control runs an operator action on a conversation: stop, reset, remove
// (its sandbox).
func (c *Channel) control(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Action string `json:"action"`
		Key    string `json:"key"`
	}
	if err := readJSON(r, &req); err != nil {
		c.writeErr(w, "control", err)
		return
	}
	key, err := conch.ParseConversationKey(req.Key)
	if err != nil {
		writeError(w, http.StatusBadRequest, "key: want channel:id")
		return
	}
	ctx := r.Context()
	var msg string
	switch req.Action {
	case "stop":
		var stopped bool
		stopped, err = c.opts.Control.Stop(ctx, key)
		msg = "nothing was running"
		if stopped {
			msg = "stopped"
		}
	case "reset":
		err = c.opts.Control.Reset(ctx, key)
		msg = "reset"
	case "remove":
		if c.opts.Sandboxes == nil {
			writeError(w, http.StatusNotFound, "no sandbox backend")
			return
		}
		err = c.opts.Sandboxes.Remove(ctx, key)
		msg = "sandbox removed"
	default:
		writeError(w, http.StatusBadRequest, "action: want stop, reset or remove")
		return
	}
	if err != nil {
		c.writeErr(w, req.Action, err)
		return
	}
	c.log.Info("dashboard action", "action", req.Action, "conversation", key.String())
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "message": msg})
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

var htmlReplacer = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;")

func htmlEscape(s string) string { return htmlReplacer.Replace(s) }
