package fakellm_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"conch/internal/testenv/fakellm"

	"google.golang.org/genai"
)

// The official Go SDK reads the fake's stream over TLS as it reads the API's.
func TestGeminiStreamWithSDK(t *testing.T) {
	s := fakellm.New(t, fakellm.TLS())
	if !strings.HasPrefix(s.URL(), "https://") {
		t.Fatalf("URL %q: want https with TLS", s.URL())
	}
	pool := x509.NewCertPool()
	pool.AddCert(s.Certificate())
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: "k", Backend: genai.BackendGeminiAPI, HTTPClient: hc,
		HTTPOptions: genai.HTTPOptions{BaseURL: s.BaseURL(fakellm.Gemini)}})
	if err != nil {
		t.Fatal(err)
	}
	want := "The answer is forty-two, and it comes in pieces."
	s.Push(fakellm.Text(want), fakellm.ToolCall("bash", `{"cmd":"ls"}`))

	var text strings.Builder
	var chunks int
	var finish genai.FinishReason
	var usage *genai.GenerateContentResponseUsageMetadata
	for resp, err := range c.Models.GenerateContentStream(ctx, "gemini-test", genai.Text("hi"), nil) {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		chunks++
		text.WriteString(resp.Text())
		finish, usage = resp.Candidates[0].FinishReason, resp.UsageMetadata
	}
	if text.String() != want || chunks < 2 {
		t.Errorf("text: got %q in %d chunks, want %q in several", text.String(), chunks, want)
	}
	if finish != genai.FinishReasonStop || usage == nil || usage.CandidatesTokenCount == 0 {
		t.Errorf("last chunk: got finish %q usage %+v, want STOP and the output tokens", finish, usage)
	}

	var calls []*genai.FunctionCall
	for resp, err := range c.Models.GenerateContentStream(ctx, "gemini-test", genai.Text("again"), nil) {
		if err != nil {
			t.Fatalf("second stream: %v", err)
		}
		calls = append(calls, resp.FunctionCalls()...)
	}
	if len(calls) != 1 || calls[0].Name != "bash" || calls[0].Args["cmd"] != "ls" {
		t.Errorf("function calls: got %+v, want one bash call with cmd=ls", calls)
	}
	reqs := s.Requests()
	if len(reqs) != 2 || reqs[1].Model != "gemini-test" || reqs[1].Messages[0].Text != "again" {
		t.Errorf("recorded: got %+v, want two requests, the second saying again", reqs)
	}
}

// The raw events: "data: {json}" separated by CRLF CRLF, as the API sends.
func TestGeminiStreamWire(t *testing.T) {
	s := fakellm.New(t)
	s.Push(fakellm.Text("one two three four five six"))
	resp, err := http.Post(s.URL()+"/v1beta/models/g:streamGenerateContent?alt=sse", "application/json",
		strings.NewReader(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type: got %q, want text/event-stream", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	var events []map[string]any
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("line %q: want data: {json}", line)
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		events = append(events, e)
	}
	if len(events) != 6 {
		t.Fatalf("got %d events, want 6 (a word each)", len(events))
	}
	for i, e := range events {
		c := e["candidates"].([]any)[0].(map[string]any)
		_, has := c["finishReason"]
		if last := i == len(events)-1; has != last {
			t.Errorf("event %d: finishReason present=%v, want it only on the last", i, has)
		}
		if e["responseId"] == "" || e["modelVersion"] != "g" {
			t.Errorf("event %d: got %v, want responseId and modelVersion g", i, e)
		}
	}
}
