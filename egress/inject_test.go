package egress_test

import (
	"bufio"
	"bytes"
	"conch/internal/testenv"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"conch/egress"
	"conch/internal/testenv/fakellm"
)

const realKey = "sk-real-key-0123456789abcdefghijklmnop"

// injectorHarness serves an Injector on a loopback listener, as a Bridge's
// connections would reach it, and keeps what it reported.
type injectorHarness struct {
	in     *egress.Injector
	origin string // http://127.0.0.1:port
	log    *testenv.SyncBuffer

	mu      sync.Mutex
	events  []egress.Event
	changed chan struct{} // closed and replaced when an event arrives
}

// Events waits (up to 10 s) until at least n requests were reported and
// returns them all: an event is reported once the request's handling ended,
// which may be after the client read the answer.
func (h *injectorHarness) Events(t *testing.T, n int) []egress.Event {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		h.mu.Lock()
		evs, ch := append([]egress.Event(nil), h.events...), h.changed
		h.mu.Unlock()
		if len(evs) >= n {
			return evs
		}
		select {
		case <-ch:
		case <-deadline:
			t.Errorf("got %d events, want %d", len(evs), n)
			return evs
		}
	}
}

func startInjector(t *testing.T, o egress.InjectorOptions) *injectorHarness {
	t.Helper()
	h := &injectorHarness{log: &testenv.SyncBuffer{}, changed: make(chan struct{})}
	o.Logger = slog.New(slog.NewTextHandler(h.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	o.OnRequest = func(e egress.Event) {
		h.mu.Lock()
		h.events = append(h.events, e)
		close(h.changed)
		h.changed = make(chan struct{})
		h.mu.Unlock()
	}
	in, err := egress.NewInjector(o)
	if err != nil {
		t.Fatalf("NewInjector: %v", err)
	}
	h.in = in
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); _ = in.ServeConn(ctx, c) }()
		}
	}()
	t.Cleanup(func() {
		cancel()
		ln.Close()
		wg.Wait()
		in.Close()
		if strings.Contains(h.log.String(), realKey) {
			t.Errorf("the real key was logged:\n%s", h.log.String())
		}
	})
	h.origin = "http://" + ln.Addr().String()
	return h
}

func TestInjectorVendors(t *testing.T) {
	for _, tc := range []struct {
		vendor  egress.Vendor
		baseSfx string // the operator's base URL path
		path    string // what the CLI appends to its base URL
		body    string
		creds   http.Header // what the CLI sends
		query   string
		wantHdr string // the header the upstream must get the key in
		wantVal string
	}{
		{
			vendor: egress.Anthropic, path: "/v1/messages",
			body:    `{"model":"claude-test","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`,
			creds:   http.Header{"X-Api-Key": {egress.PlaceholderKey}, "Authorization": {"Bearer " + egress.PlaceholderKey}, "Anthropic-Version": {"2023-06-01"}},
			wantHdr: "X-Api-Key", wantVal: realKey,
		},
		{
			vendor: egress.OpenAI, baseSfx: "/v1", path: "/chat/completions",
			body:    `{"model":"gpt-test","messages":[{"role":"user","content":"hi"}]}`,
			creds:   http.Header{"Authorization": {"Bearer " + egress.PlaceholderKey}, "X-Api-Key": {egress.PlaceholderKey}},
			wantHdr: "Authorization", wantVal: "Bearer " + realKey,
		},
		{
			vendor: egress.Gemini, path: "/v1beta/models/gemini-test:generateContent",
			body:  `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`,
			creds: http.Header{"X-Goog-Api-Key": {egress.PlaceholderKey}}, query: "?key=" + egress.PlaceholderKey,
			wantHdr: "X-Goog-Api-Key", wantVal: realKey,
		},
	} {
		t.Run(string(tc.vendor), func(t *testing.T) {
			up := fakellm.New(t)
			up.Push(fakellm.Text("hello from upstream"))
			h := startInjector(t, egress.InjectorOptions{Vendor: tc.vendor, Key: realKey, BaseURL: up.URL() + tc.baseSfx})
			base := h.in.ClientBaseURL(h.origin)
			if want := h.origin + tc.baseSfx; base != want {
				t.Fatalf("ClientBaseURL: got %q, want %q", base, want)
			}
			req, _ := http.NewRequest(http.MethodPost, base+tc.path+tc.query, strings.NewReader(tc.body))
			req.Header = tc.creds.Clone()
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("request: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "hello from upstream") {
				t.Fatalf("got %d %s, want 200 with the upstream's answer", resp.StatusCode, body)
			}
			got, ok := up.Last()
			if !ok {
				t.Fatal("the upstream saw no request")
			}
			if got.APIKey != realKey {
				t.Errorf("upstream's key: got %q, want the real key", got.APIKey)
			}
			if v := got.Header.Get(tc.wantHdr); v != tc.wantVal {
				t.Errorf("upstream's %s: got %q, want %q", tc.wantHdr, v, tc.wantVal)
			}
			for name, vs := range got.Header {
				for _, v := range vs {
					if strings.Contains(v, egress.PlaceholderKey) {
						t.Errorf("the placeholder reached the upstream in %s: %q", name, v)
					}
				}
			}
			if want := tc.baseSfx + tc.path; got.Path != want {
				t.Errorf("upstream path: got %q, want %q", got.Path, want)
			}
			for _, h := range []string{"Authorization", "X-Api-Key", "X-Goog-Api-Key"} {
				if h != tc.wantHdr && got.Header.Get(h) != "" {
					t.Errorf("upstream got a %s header (%q); only %s should carry a credential", h, got.Header.Get(h), tc.wantHdr)
				}
			}
			evs := h.Events(t, 1)
			if len(evs) != 1 || !evs[0].Allowed || evs[0].Status != http.StatusOK || evs[0].Up != int64(len(tc.body)) || evs[0].Down == 0 {
				t.Errorf("events: got %+v, want one forwarded request with its byte counts", evs)
			}
			if len(evs) > 0 && strings.Contains(evs[0].Target, egress.PlaceholderKey) {
				t.Errorf("the event's target holds the query: %q", evs[0].Target)
			}
		})
	}
}

// TestInjectorOpenAIDefaultBase: the vendor default for OpenAI includes
// /v1, and so does the base URL the CLI is given; nothing is joined twice.
func TestInjectorBasePaths(t *testing.T) {
	for _, tc := range []struct {
		vendor        egress.Vendor
		base          string
		wantClient    string
		wantUpstreams string
	}{
		{egress.OpenAI, "", "http://127.0.0.1:47291/v1", "https://api.openai.com/v1"},
		{egress.OpenAI, "http://10.0.0.5:4000/v1/", "http://127.0.0.1:47291/v1", "http://10.0.0.5:4000/v1"},
		{egress.Anthropic, "", "http://127.0.0.1:47291", "https://api.anthropic.com"},
		{egress.Anthropic, "https://gw.example.com/anthropic", "http://127.0.0.1:47291/anthropic", "https://gw.example.com/anthropic"},
		{egress.Gemini, "", "http://127.0.0.1:47291", "https://generativelanguage.googleapis.com"},
	} {
		in, err := egress.NewInjector(egress.InjectorOptions{Vendor: tc.vendor, Key: realKey, BaseURL: tc.base})
		if err != nil {
			t.Fatalf("%s %q: %v", tc.vendor, tc.base, err)
		}
		if got := in.ClientBaseURL("http://127.0.0.1:47291"); got != tc.wantClient {
			t.Errorf("%s %q: ClientBaseURL got %q, want %q", tc.vendor, tc.base, got, tc.wantClient)
		}
		if got := in.Upstream(); got != tc.wantUpstreams {
			t.Errorf("%s %q: Upstream got %q, want %q", tc.vendor, tc.base, got, tc.wantUpstreams)
		}
	}
	for _, bad := range []egress.InjectorOptions{
		{Vendor: "mistral", Key: realKey},
		{Vendor: egress.OpenAI},
		{Vendor: egress.OpenAI, Key: realKey, BaseURL: "ftp://x/v1"},
		{Vendor: egress.OpenAI, Key: realKey, BaseURL: "http://user:pw@x/v1"},
		{Vendor: egress.OpenAI, Key: realKey, BaseURL: "/v1"},
	} {
		if _, err := egress.NewInjector(bad); err == nil {
			t.Errorf("NewInjector(%+v): got no error", bad)
		}
	}
}

// TestInjectorStreamsSSE: the first event reaches the client while the
// upstream is still writing, and the request body reaches the upstream
// while the client is still sending.
func TestInjectorStreamsSSE(t *testing.T) {
	gotFirstChunk := make(chan struct{})
	release := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		br := bufio.NewReader(r.Body)
		if line, err := br.ReadString('\n'); err != nil || line != "part one\n" {
			t.Errorf("upstream read %q, %v", line, err)
		}
		close(gotFirstChunk) // before the client has sent the rest
		rest, _ := io.ReadAll(br)
		if string(rest) != "part two\n" {
			t.Errorf("upstream read the rest %q", rest)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\ndata: {\"n\":1}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-time.After(20 * time.Second):
			t.Error("the client never read the first event before the upstream finished")
		}
		fmt.Fprint(w, "event: message_stop\ndata: {\"n\":2}\n\n")
	}))
	defer upstream.Close()
	h := startInjector(t, egress.InjectorOptions{Vendor: egress.Anthropic, Key: realKey, BaseURL: upstream.URL})

	pr, pw := io.Pipe()
	req, _ := http.NewRequest(http.MethodPost, h.origin+"/v1/messages", pr)
	req.Header.Set("X-Api-Key", egress.PlaceholderKey)
	type result struct {
		resp *http.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		done <- result{resp, err}
	}()
	if _, err := io.WriteString(pw, "part one\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-gotFirstChunk:
	case <-time.After(10 * time.Second):
		t.Fatal("the request body was buffered: the upstream did not get the first part while the client was sending")
	}
	io.WriteString(pw, "part two\n")
	pw.Close()
	var res result
	select {
	case res = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("no response headers while the upstream streams")
	}
	if res.err != nil {
		t.Fatal(res.err)
	}
	defer res.resp.Body.Close()
	br := bufio.NewReader(res.resp.Body)
	first := make(chan string, 1)
	go func() {
		var ev strings.Builder
		for {
			line, err := br.ReadString('\n')
			ev.WriteString(line)
			if err != nil || line == "\n" {
				break
			}
		}
		first <- ev.String()
	}()
	select {
	case ev := <-first:
		if !strings.Contains(ev, "message_start") {
			t.Fatalf("first event: got %q", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first event did not arrive while the upstream was still streaming (buffered)")
	}
	close(release)
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), "message_stop") {
		t.Fatalf("the rest of the stream: got %q", rest)
	}
}

// TestInjectorKeepsKeyFromClient: an upstream that echoes the key (in a
// header, in the body, in an error) does not get it to the client.
func TestInjectorKeepsKeyFromClient(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Echo", "your key is "+r.Header.Get("X-Api-Key"))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		// In pieces, split inside the key, to exercise the stream scrub.
		k := r.Header.Get("X-Api-Key")
		fmt.Fprintf(w, `{"error":"invalid x-api-key %s`, k[:7])
		w.(http.Flusher).Flush()
		fmt.Fprintf(w, `%s"}`, k[7:])
	}))
	defer upstream.Close()
	h := startInjector(t, egress.InjectorOptions{Vendor: egress.Anthropic, Key: realKey, BaseURL: upstream.URL})
	req, _ := http.NewRequest(http.MethodPost, h.origin+"/v1/messages", strings.NewReader("{}"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("status: got %d, want the upstream's 401", resp.StatusCode)
	}
	var head bytes.Buffer
	resp.Header.Write(&head)
	if strings.Contains(head.String()+string(body), realKey) {
		t.Fatalf("the real key reached the client:\n%s\n%s", head.String(), body)
	}
	if want := `{"error":"invalid x-api-key ` + strings.Repeat("*", len(realKey)) + `"}`; string(body) != want {
		t.Errorf("body: got %s, want %s", body, want)
	}

	// An upstream that cannot be reached: the error names it, not the key.
	dead := startInjector(t, egress.InjectorOptions{Vendor: egress.Anthropic, Key: realKey, BaseURL: fmt.Sprintf("http://127.0.0.1:%d", closedPort(t))})
	resp, err = http.Post(dead.origin+"/v1/messages", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.HasPrefix(string(body), "conch egress: upstream 127.0.0.1:") || strings.Contains(string(body), realKey) {
		t.Errorf("unreachable upstream: got %d %q", resp.StatusCode, body)
	}
	if evs := dead.Events(t, 1); len(evs) != 1 || evs[0].Reason == "" || evs[0].Status != http.StatusBadGateway {
		t.Errorf("unreachable upstream's event: got %+v", evs)
	}
}

// rawRequest sends one request as written and returns the status line and
// body of the answer.
func rawRequest(t *testing.T, origin, request string) (status, body string) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(origin, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read answer to %q: %v", request, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.Status, string(b)
}

func TestInjectorRefuses(t *testing.T) {
	var mu sync.Mutex
	seen := 0
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen++
		mu.Unlock()
	}))
	defer upstream.Close()
	h := startInjector(t, egress.InjectorOptions{Vendor: egress.OpenAI, Key: realKey, BaseURL: upstream.URL + "/v1"})
	own := strings.TrimPrefix(h.origin, "http://")
	for _, tc := range []struct{ name, req, want string }{
		{"CONNECT", "CONNECT evil.test:443 HTTP/1.1\r\nHost: evil.test:443\r\n\r\n", "CONNECT to evil.test:443 is not allowed"},
		{"absolute-form to another host", "GET http://evil.test/v1/models HTTP/1.1\r\nHost: " + own + "\r\n\r\n", `host "evil.test" is not allowed`},
		{"another Host", "GET /v1/models HTTP/1.1\r\nHost: evil.test\r\n\r\n", `host "evil.test" is not allowed`},
		{"own address, other port", "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n", `host "127.0.0.1:1" is not allowed`},
		{"websocket", "GET /v1/responses HTTP/1.1\r\nHost: " + own + "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", "WebSocket"},
		{"dot segments", "GET /v1/../admin HTTP/1.1\r\nHost: " + own + "\r\n\r\n", "segments are not allowed"},
		{"outside the base path", "GET /v2/models HTTP/1.1\r\nHost: " + own + "\r\n\r\n", "outside the API's base path /v1"},
	} {
		before := len(h.Events(t, 0))
		status, body := rawRequest(t, h.origin, tc.req)
		if status != "403 Forbidden" || !strings.HasPrefix(body, "conch egress: ") || !strings.Contains(body, tc.want) {
			t.Errorf("%s: got %s %q, want 403 saying %q", tc.name, status, body, tc.want)
		}
		evs := h.Events(t, before+1)
		if len(evs) != before+1 {
			t.Errorf("%s: events %+v, want one refusal audited", tc.name, evs[before:])
			continue
		}
		if evs[before].Allowed || !strings.Contains(evs[before].Reason, tc.want) || evs[before].Status != http.StatusForbidden {
			t.Errorf("%s: events %+v, want one refusal audited", tc.name, evs[before:])
		}
	}
	// Absolute form naming the injector itself, and localhost, are served.
	for _, req := range []string{
		"GET http://" + own + "/v1/models HTTP/1.1\r\nHost: " + own + "\r\n\r\n",
		"GET /v1/models HTTP/1.1\r\nHost: localhost:" + strings.Split(own, ":")[1] + "\r\n\r\n",
	} {
		if status, body := rawRequest(t, h.origin, req); status != "200 OK" {
			t.Errorf("%q: got %s %q, want it forwarded", req, status, body)
		}
	}
	// A CONNECT tunnel to the injector's own address (a client that sends
	// everything through HTTPS_PROXY) carries requests like any other.
	c, err := net.Dial("tcp", own)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", own, own)
	if resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect}); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT to the injector itself: %v %v", resp, err)
	}
	for i := 0; i < 2; i++ { // two requests: the tunnel keeps alive
		fmt.Fprintf(c, "GET /v1/models HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", own, egress.PlaceholderKey)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d in the tunnel: %v %v", i, resp, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if seen != 4 {
		t.Errorf("the upstream saw %d requests, want only the 4 allowed ones", seen)
	}
	if !strings.Contains(h.log.String(), "request refused") {
		t.Errorf("no log line for the refusals:\n%s", h.log.String())
	}
}

// fixedResolver answers every name with one address.
type fixedResolver netip.Addr

func (r fixedResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.Addr(r)}, nil
}

// TestInjectorPrivateUpstreams: a vendor's default host that resolves to a
// private or loopback address (DNS rebinding) is refused; the operator's
// base URL on a loopback address is reached (TestInjectorVendors).
func TestInjectorPrivateUpstreams(t *testing.T) {
	for _, addr := range []string{"127.0.0.1", "10.0.0.5", "169.254.169.254", "::1"} {
		h := startInjector(t, egress.InjectorOptions{Vendor: egress.Gemini, Key: realKey, Resolver: fixedResolver(netip.MustParseAddr(addr))})
		resp, err := http.Post(h.origin+"/v1beta/models/m:generateContent", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "generativelanguage.googleapis.com is not a public address") {
			t.Errorf("vendor default resolving to %s: got %d %q, want 403", addr, resp.StatusCode, body)
		}
		if evs := h.Events(t, 1); len(evs) != 1 || !strings.Contains(evs[0].Reason, "not a public address") {
			t.Errorf("vendor default resolving to %s: events %+v", addr, evs)
		}
	}
}
