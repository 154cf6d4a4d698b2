package slack

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Sign is Slack's request signature: "v0=" and the hex HMAC-SHA256 of
// "v0:<timestamp>:<body>" keyed with the app's signing secret.
func Sign(secret string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(m, "v0:%d:", ts)
	m.Write(body)
	return "v0=" + hex.EncodeToString(m.Sum(nil))
}

// SignedRequest is a request as the Events API sends it to a Request URL.
func SignedRequest(url, secret string, ts time.Time, body []byte) *http.Request {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set("X-Slack-Signature", Sign(secret, ts.Unix(), body))
	return req
}

// DeliverEvents switches the server from Socket Mode to the Events API:
// every event is posted to url, signed with secret, one at a time in
// order; an answer other than 2xx (or none within 3 s) is retried up to
// three times with X-Slack-Retry-Num and X-Slack-Retry-Reason, as Slack
// does. Events already waiting are posted too.
func (s *Server) DeliverEvents(url, secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eventsURL, s.signingSecret = url, secret
	if s.eventsQueue == nil {
		s.eventsQueue = make(chan *envelope, 4096)
		go s.postLoop()
	}
	for _, e := range s.envelopes {
		if !e.acked && e.sentAt.IsZero() {
			e.sentAt = time.Now()
			s.eventsQueue <- e
		}
	}
}

// VerifyURL sends the url_verification challenge Slack sends when a
// Request URL is saved, and checks the answer.
func (s *Server) VerifyURL(url, secret string) error {
	body, _ := json.Marshal(map[string]string{"token": "fake-verification-token", "challenge": "chal-" + randomHex(8), "type": "url_verification"})
	resp, err := http.DefaultClient.Do(SignedRequest(url, secret, time.Now(), body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	var m map[string]string
	_ = json.Unmarshal(body, &m)
	if resp.StatusCode != http.StatusOK || string(got) != m["challenge"] {
		return fmt.Errorf("url_verification: HTTP %d %q, want the challenge %q", resp.StatusCode, got, m["challenge"])
	}
	return nil
}

// EventPosts are the HTTP statuses of every Events API post, in order
// (0: no answer).
func (s *Server) EventPosts() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.eventPosts...)
}

func (s *Server) postLoop() {
	client := &http.Client{Timeout: 3 * time.Second}
	for e := range s.eventsQueue {
		for attempt := 0; attempt <= maxRetries; attempt++ {
			s.mu.Lock()
			url, secret, closed := s.eventsURL, s.signingSecret, s.closed
			s.mu.Unlock()
			if closed {
				return
			}
			req := SignedRequest(url, secret, time.Now(), e.Payload)
			if attempt > 0 {
				req.Header.Set("X-Slack-Retry-Num", strconv.Itoa(attempt))
				req.Header.Set("X-Slack-Retry-Reason", "http_error")
			}
			status := 0
			resp, err := client.Do(req)
			if err == nil {
				status = resp.StatusCode
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			s.mu.Lock()
			s.eventPosts = append(s.eventPosts, status)
			if attempt > 0 {
				e.Retries++
			}
			ok := status >= 200 && status < 300
			if ok {
				e.acked = true
			}
			s.notifyLocked()
			s.mu.Unlock()
			if ok {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// DeliverInteractions sets the Interactivity Request URL that button
// presses are posted to while the server delivers events over the Events
// API (DeliverEvents).
func (s *Server) DeliverInteractions(url string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.interactionsURL = url
}

// InteractionPosts are the HTTP statuses of every interaction post, in
// order (0: no answer).
func (s *Server) InteractionPosts() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.interactionPosts...)
}

// postInteraction posts one press as Slack does: a signed form with the
// payload field; it is not retried.
func (s *Server) postInteraction(to, secret string, payload []byte) {
	body := []byte("payload=" + url.QueryEscape(string(payload)))
	req := SignedRequest(to, secret, time.Now(), body)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	status := 0
	resp, err := (&http.Client{Timeout: 3 * time.Second}).Do(req)
	if err == nil {
		status = resp.StatusCode
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	s.mu.Lock()
	s.interactionPosts = append(s.interactionPosts, status)
	s.notifyLocked()
	s.mu.Unlock()
}
