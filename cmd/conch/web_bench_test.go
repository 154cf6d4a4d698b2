package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"conch"
	"conch/agent"
	"conch/channel/cli"
	"conch/channel/web"
	"conch/fake"
	"conch/gateway"
	"conch/sandbox/sandboxd/sandboxdtest"
	"conch/sqlite/sqlitetest"
)

// webBench is a gateway with the CLI channel and the web chat over one
// file-backed store and an instant scripted model, so the figures are
// conch's own overhead.
type webBench struct {
	gw      *gateway.Gateway
	web     *web.Channel
	srv     *httptest.Server
	client  *http.Client
	cliIn   *io.PipeWriter
	cliOut  *bufio.Reader
	stop    func()
	cliConv conch.ConversationKey
}

func newWebBench(b *testing.B) *webBench {
	b.Helper()
	db := sqlitetest.MustOpenFile(b)
	model := &fake.Model{Func: func(_ context.Context, req conch.ModelRequest) (conch.ModelResponse, error) {
		return conch.ModelResponse{Text: "re: " + req.Messages[len(req.Messages)-1].Text, StopReason: conch.StopEnd}, nil
	}}
	ag, err := agent.New(agent.Options{Model: model, Store: db, Facts: db})
	if err != nil {
		b.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	cliConv := conch.ConversationKey{Channel: conch.ChannelCLI, ID: "bench"}
	cliCh := &cli.Channel{In: inR, Out: outW, Err: io.Discard, Key: cliConv, User: "local"}
	// As conch up wires them: the gateway first, the web chat over it,
	// attached when the gateway runs.
	gw, err := gateway.New(gateway.Options{Store: db, Agent: ag, Channels: []conch.Channel{cliCh}, Facts: db, Events: db,
		Allow: map[conch.ChannelName]gateway.Allowlist{conch.ChannelCLI: gateway.NewAllowlist("local")}})
	if err != nil {
		b.Fatal(err)
	}
	wc, err := web.New(web.Options{Events: gw.Events(), Control: gw, Store: db, Read: db, History: db, Logger: slog.New(slog.DiscardHandler), MaxMessageBytes: 64 << 10, LoginTTL: 10 * time.Minute, SessionTTL: 720 * time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	mux := http.NewServeMux()
	wc.Register(mux)
	srv := httptest.NewServer(mux)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		_ = gw.Run(ctx, gateway.Attached{Channel: wc, Allow: gateway.NewAllowlist("owner")})
		close(done)
	}()
	tok, err := wc.Auth().NewLoginToken(ctx)
	if err != nil {
		b.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar}
	resp, err := client.Get(srv.URL + "/login?token=" + tok)
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	client.Transport = tokenTransport{resp.Header.Get("X-Conch-Token")} // the page sends it with every request
	return &webBench{gw: gw, web: wc, srv: srv, client: client, cliIn: inW, cliOut: bufio.NewReader(outR), cliConv: cliConv,
		stop: func() { cancel(); inW.Close(); srv.Close(); <-done }}
}

func (wb *webBench) newConversation(b *testing.B) string {
	req, _ := http.NewRequest("POST", wb.srv.URL+"/api/conversations", strings.NewReader(`{}`))
	req.Header.Set("Origin", wb.srv.URL)
	resp, err := wb.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var c struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		b.Fatal(err)
	}
	return c.ID
}

func (wb *webBench) socket(b *testing.B, id string) *websocket.Conn {
	u := "ws" + strings.TrimPrefix(wb.srv.URL, "http") + "/api/chat?c=" + id + "&after=0&batch=1" // as the page opens it
	conn, _, err := websocket.Dial(context.Background(), u, &websocket.DialOptions{HTTPClient: wb.client, HTTPHeader: http.Header{"Origin": {wb.srv.URL}}})
	if err != nil {
		b.Fatal(err)
	}
	conn.SetReadLimit(1 << 20)
	return conn
}

// BenchmarkWebRoundTrip measures one message from a WebSocket client to the
// answer's event on the same socket ("web"), and the same through the CLI
// channel, a line in and the reply line out ("cli"), over one gateway and
// store, each in its own loop of at least sandboxdtest.MinSamples samples
// (`-benchtime 1x` is a full measurement); it reports both p50s and p99s in
// ms and the web's as a multiple of the CLI's.
func BenchmarkWebRoundTrip(b *testing.B) {
	wb := newWebBench(b)
	defer wb.stop()
	conn := wb.socket(b, wb.newConversation(b))
	defer conn.CloseNow()
	i := 0
	web := &sandboxdtest.Method{Name: "web", Run: func(ctx context.Context) error {
		i++
		text := fmt.Sprint("m", i)
		f, _ := json.Marshal(map[string]string{"type": "send", "id": fmt.Sprint("b", i), "text": text})
		if err := conn.Write(ctx, websocket.MessageText, f); err != nil {
			return err
		}
		want := []byte(`"re: ` + text + `"`)
		// A round trip without its answer fails with what came instead,
		// rather than hanging `make bench`.
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		var got []string
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				return fmt.Errorf("no answer to %q (%w); frames read:\n%s", text, err, strings.Join(got, "\n"))
			}
			if bytes.Contains(data, []byte(`"role":"assistant"`)) && bytes.Contains(data, want) {
				return nil
			}
			if bytes.Contains(data, []byte(`"type":"error"`)) {
				return fmt.Errorf("message %q refused: %s", text, data)
			}
			got = append(got, string(data))
		}
	}}
	cliMethod := &sandboxdtest.Method{Name: "cli", Run: func(context.Context) error {
		i++
		text := fmt.Sprint("m", i)
		if _, err := fmt.Fprintln(wb.cliIn, text); err != nil {
			return err
		}
		line, err := wb.cliOut.ReadString('\n')
		if err != nil || strings.TrimSpace(line) != "re: "+text {
			return fmt.Errorf("cli reply %q, %v", line, err)
		}
		return nil
	}}
	methods := []*sandboxdtest.Method{cliMethod, web}
	b.ResetTimer()
	sandboxdtest.Measure(context.Background(), b, methods)
	sandboxdtest.Report(b, methods, "cli", time.Millisecond)
}

// BenchmarkWebFanout100 publishes events of one conversation to 100 open
// chat sockets through the gateway's hub and reports the events published
// per second and the deliveries per second over all sockets. "kept" events
// (notices) are written to the store before they go out, so the store's
// write rate bounds them; "live" events (tool output) are fanned out only.
func BenchmarkWebFanout100(b *testing.B) {
	b.Run("kept", func(b *testing.B) {
		benchFanout(b, func(i, j int) conch.EventData { return conch.NoticeEvent{Text: fmt.Sprint(i, "/", j)} })
	})
	b.Run("live", func(b *testing.B) {
		benchFanout(b, func(i, j int) conch.EventData { return conch.ToolProgress{Text: fmt.Sprint(i, "/", j)} })
	})
}

func benchFanout(b *testing.B, event func(i, j int) conch.EventData) {
	const subs, batch = 100, 100
	wb := newWebBench(b)
	defer wb.stop()
	id := wb.newConversation(b)
	key := conch.ConversationKey{Channel: conch.ChannelWeb, ID: id}
	conns := make([]*websocket.Conn, subs)
	for i := range conns {
		conns[i] = wb.socket(b, id)
		defer conns[i].CloseNow()
	}
	hub := wb.gw.Events()
	ctx := context.Background()
	// readUntil reads frames until one whose data text is want.
	readUntil := func(conn *websocket.Conn, want string) error {
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				return err
			}
			type frame struct {
				Event struct {
					Data struct{ Text string } `json:"data"`
				} `json:"event"`
			}
			var f struct {
				frame
				Frames []frame `json:"frames"` // an "events" frame
			}
			if err := json.Unmarshal(data, &f); err != nil {
				return err
			}
			for _, g := range append(f.Frames, f.frame) {
				if g.Event.Data.Text == want {
					return nil
				}
			}
		}
	}
	// Every socket subscribed: one event seen by all.
	hub.Publish(ctx, key, 0, conch.NoticeEvent{Text: "warm-up"})
	for _, c := range conns {
		if err := readUntil(c, "warm-up"); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		for j := range batch {
			hub.Publish(ctx, key, 0, event(i, j))
		}
		last := fmt.Sprint(i, "/", batch-1)
		var wg sync.WaitGroup
		for _, c := range conns {
			wg.Go(func() {
				if err := readUntil(c, last); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N*batch*subs)/elapsed.Seconds(), "deliveries/s")
	b.ReportMetric(float64(b.N*batch)/elapsed.Seconds(), "events/s")
	b.ReportMetric(0, "ns/op")
}

// tokenTransport adds a web session's request token to every request.
type tokenTransport struct{ token string }

func (t tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Conch-Token", t.token)
	return http.DefaultTransport.RoundTrip(r)
}
