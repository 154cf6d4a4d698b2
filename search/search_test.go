package search

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// fakeService is a wire-exact stand-in for one search API: it checks the
// request the way the real service reads it and answers with a body shaped
// like the service's documented response.
func fakeService(t *testing.T, check func(r *http.Request, body []byte) (int, string)) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		status, answer := check(r, body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	return srv
}

const tavilyAnswer = `{"query":"go generics","follow_up_questions":null,"answer":null,"images":[],
"results":[{"url":"https://go.dev/doc/tutorial/generics","title":"Tutorial: Getting started with generics","content":"This tutorial introduces the basics of generics in Go.","score":0.98,"raw_content":null},
{"url":"https://go.dev/blog/intro-generics","title":"An Introduction To Generics","content":"Go 1.18 adds generics.","score":0.91,"raw_content":null}],
"response_time":1.05,"request_id":"123e4567-e89b-12d3-a456-426614174111"}`

func TestTavily(t *testing.T) {
	srv := fakeService(t, func(r *http.Request, body []byte) (int, string) {
		if r.Method != http.MethodPost || r.URL.Path != "/search" {
			return 404, `{"detail":{"error":"not found"}}`
		}
		if r.Header.Get("Authorization") != "Bearer tvly-test" {
			return 401, `{"detail":{"error":"Unauthorized: missing or invalid API key."}}`
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			return 400, `{"detail":{"error":"content type ` + ct + `"}}`
		}
		var req map[string]any
		if err := json.Unmarshal(body, &req); err != nil {
			return 400, `{"detail":{"error":"bad json"}}`
		}
		if req["query"] != "go generics" || req["max_results"] != float64(2) || req["search_depth"] != "advanced" {
			return 400, `{"detail":{"error":"unexpected request ` + string(body) + `"}}`
		}
		if _, ok := req["api_key"]; ok {
			return 400, `{"detail":{"error":"key in the body"}}`
		}
		return 200, tavilyAnswer
	})
	b, err := New(Config{Backend: "tavily", APIKey: "tvly-test", BaseURL: srv.URL, Depth: "advanced"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Search(context.Background(), Query{Text: "go generics", Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := []Result{
		{Title: "Tutorial: Getting started with generics", URL: "https://go.dev/doc/tutorial/generics", Snippet: "This tutorial introduces the basics of generics in Go."},
		{Title: "An Introduction To Generics", URL: "https://go.dev/blog/intro-generics", Snippet: "Go 1.18 adds generics."},
	}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("got %+v, want %+v", got, want)
	}
	bad, _ := New(Config{Backend: "tavily", APIKey: "wrong", BaseURL: srv.URL})
	_, err = bad.Search(context.Background(), Query{Text: "x", Count: 1})
	var se *Error
	if !errors.As(err, &se) || se.Status != 401 || !strings.Contains(se.Msg, "invalid API key") {
		t.Errorf("bad key: got %v, want HTTP 401 with the service's message", err)
	}
}

const braveAnswer = `{"type":"search","query":{"original":"conch shell","more_results_available":true},
"mixed":{"type":"mixed","main":[{"type":"web","index":0,"all":false}]},
"web":{"type":"search","family_friendly":true,"results":[
{"type":"search_result","title":"Conch - Wikipedia","url":"https://en.wikipedia.org/wiki/Conch","is_source_local":false,"description":"Conch is a common name of a number of different medium-to-large-sized sea snails.","page_age":"2024-01-01T00:00:00","profile":{"name":"Wikipedia","url":"https://en.wikipedia.org/wiki/Conch"},"language":"en","family_friendly":true},
{"type":"search_result","title":"Queen conch","url":"https://example.org/queen","description":"The queen conch is a large sea snail.","language":"en"}]}}`

func TestBrave(t *testing.T) {
	srv := fakeService(t, func(r *http.Request, _ []byte) (int, string) {
		if r.Method != http.MethodGet || r.URL.Path != "/res/v1/web/search" {
			return 404, `{"type":"ErrorResponse","error":{"status":404,"code":"NOT_FOUND","detail":"no route"}}`
		}
		if r.Header.Get("X-Subscription-Token") != "BSA-test" {
			return 401, `{"type":"ErrorResponse","error":{"id":"x","status":401,"code":"SUBSCRIPTION_TOKEN_INVALID","detail":"The provided subscription token is invalid."}}`
		}
		if r.Header.Get("Accept") != "application/json" {
			return 406, `{}`
		}
		q := r.URL.Query()
		if q.Get("q") != "conch shell" || q.Get("count") != "20" {
			return 422, `{"type":"ErrorResponse","error":{"status":422,"code":"VALIDATION","detail":"unexpected ` + r.URL.RawQuery + `"}}`
		}
		return 200, braveAnswer
	})
	b, err := New(Config{Backend: "brave", APIKey: "BSA-test", BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Search(context.Background(), Query{Text: "conch shell", Count: 50})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Title != "Conch - Wikipedia" || got[1].URL != "https://example.org/queen" || !strings.HasPrefix(got[0].Snippet, "Conch is a common name") {
		t.Errorf("got %+v", got)
	}
	bad, _ := New(Config{Backend: "brave", APIKey: "nope", BaseURL: srv.URL})
	_, err = bad.Search(context.Background(), Query{Text: "conch shell", Count: 5})
	if err == nil || !strings.Contains(err.Error(), "The provided subscription token is invalid.") {
		t.Errorf("bad key: got %v, want the service's detail", err)
	}
}

const searxAnswer = `{"query":"tmux","number_of_results":0,"results":[
{"url":"https://github.com/tmux/tmux","title":"tmux/tmux","content":"tmux source code","engine":"duckduckgo","parsed_url":["https","github.com","/tmux/tmux","","",""],"template":"default.html","engines":["duckduckgo","google"],"positions":[1,1],"score":4.0,"category":"general"},
{"url":"https://man.openbsd.org/tmux","title":"tmux(1)","content":"terminal multiplexer","engine":"google","engines":["google"],"score":1.0,"category":"general"},
{"url":"https://example.com/3","title":"third","content":"","engine":"google","engines":["google"],"score":0.5,"category":"general"}],
"answers":[],"corrections":[],"infoboxes":[],"suggestions":["tmux cheat sheet"],"unresponsive_engines":[]}`

func TestSearXNG(t *testing.T) {
	formats := "json"
	srv := fakeService(t, func(r *http.Request, _ []byte) (int, string) {
		if r.Method != http.MethodGet || r.URL.Path != "/searx/search" {
			return 404, `{}`
		}
		q := r.URL.Query()
		if q.Get("format") != "json" || formats != "json" {
			return 403, "<html>403 Forbidden</html>"
		}
		if q.Get("q") != "tmux" {
			return 400, `{}`
		}
		return 200, searxAnswer
	})
	b, err := New(Config{Backend: "searxng", BaseURL: srv.URL + "/searx/"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Search(context.Background(), Query{Text: "tmux", Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].URL != "https://github.com/tmux/tmux" || got[1].Snippet != "terminal multiplexer" {
		t.Errorf("got %+v, want the first two results", got)
	}
	formats = "html"
	_, err = b.Search(context.Background(), Query{Text: "tmux", Count: 2})
	if err == nil || !strings.Contains(err.Error(), "search.formats") {
		t.Errorf("json disabled: got %v, want a hint about search.formats", err)
	}
}

func TestNewNeedsKeys(t *testing.T) {
	for _, c := range []Config{{Backend: "tavily"}, {Backend: "brave"}, {Backend: "searxng"}} {
		if _, err := New(c); !errors.Is(err, ErrNotConfigured) {
			t.Errorf("%s without key: got %v, want ErrNotConfigured", c.Backend, err)
		}
	}
	if _, err := New(Config{Backend: "google"}); err == nil {
		t.Error("unknown backend accepted")
	}
}
