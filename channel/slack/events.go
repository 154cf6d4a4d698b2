package slack

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"

	"github.com/slack-go/slack"
)

// EventsPath is where the Events API posts (Request URL
// https://<public host>/slack/events).
const EventsPath = "/slack/events"

// InteractionsPath is the Interactivity Request URL's path (button
// presses) in Mode "events".
const InteractionsPath = "/slack/interactions"

// maxEventBytes bounds one Events API request.
const maxEventBytes = 1 << 20

// Register adds the Events API endpoint to mux (Mode "events"). Each
// request's signature (X-Slack-Signature, HMAC-SHA256 with the signing
// secret) is checked and one older than five minutes
// (X-Slack-Request-Timestamp) is refused, so a captured request cannot be
// replayed later; within the window a repeat is the same message and the
// store refuses its copy. The answer is 200 only after the gateway took
// the message; otherwise Slack retries (X-Slack-Retry-Num).
func (c *Channel) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST "+EventsPath, c.serveEvents)
	mux.HandleFunc("POST "+InteractionsPath, c.serveInteractions)
}

// verified reads a request's body and checks its signature and age; it
// answers the refusal itself (ok false).
func (c *Channel) verified(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxEventBytes+1))
	if err != nil || len(body) > maxEventBytes {
		http.Error(w, "request too large", http.StatusRequestEntityTooLarge)
		return nil, false
	}
	v, err := slack.NewSecretsVerifier(r.Header, c.opts.SigningSecret)
	if err == nil {
		_, _ = v.Write(body)
		err = v.Ensure()
	}
	if err != nil {
		status := http.StatusUnauthorized
		if errors.Is(err, slack.ErrExpiredTimestamp) {
			c.log.Warn("slack events: request outside the 5 minute window refused (a replay, or a clock off)", "err", err)
		} else {
			c.log.Warn("slack events: request with a bad signature refused", "err", err)
		}
		http.Error(w, "invalid signature", status)
		return nil, false
	}
	return body, true
}

// serveInteractions is the Interactivity Request URL (Mode "events"): a
// button press as a signed form with one field, payload (JSON). Slack does
// not retry interactions: a press that could not be recorded is answered
// 500 and the person presses again (or replies).
func (c *Channel) serveInteractions(w http.ResponseWriter, r *http.Request) {
	body, ok := c.verified(w, r)
	if !ok {
		return
	}
	form, err := url.ParseQuery(string(body))
	if err != nil || form.Get("payload") == "" {
		http.Error(w, "no payload", http.StatusBadRequest)
		return
	}
	select {
	case <-c.ready:
	default:
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	if err := c.onInteraction(r.Context(), json.RawMessage(form.Get("payload"))); err != nil {
		c.log.Warn("slack: button press not handed over", "err", err)
		http.Error(w, "try again", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (c *Channel) serveEvents(w http.ResponseWriter, r *http.Request) {
	body, ok := c.verified(w, r)
	if !ok {
		return
	}
	var head struct {
		Type      string `json:"type"`
		Challenge string `json:"challenge"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	if head.Type == "url_verification" {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, head.Challenge)
		return
	}
	select {
	case <-c.ready:
	default:
		http.Error(w, "not ready", http.StatusServiceUnavailable) // Slack retries
		return
	}
	if r.Header.Get("X-Slack-Retry-Num") != "" {
		c.mu.Lock()
		c.health.redelivery++
		c.mu.Unlock()
	}
	ctx := r.Context()
	if err := c.onEnvelope(ctx, body); err != nil {
		c.log.Warn("slack events: event not handed over; Slack will retry", "err", err)
		http.Error(w, "try again", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
}
