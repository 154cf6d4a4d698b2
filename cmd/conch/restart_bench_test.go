package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"conch/internal/testenv/engine"
	"conch/internal/testenv/fakellm"
	"conch/sandbox/sandboxd/sandboxdtest"
)

// restartConvs is how many live conversations BenchmarkRestart keeps.
const restartConvs = 20

// BenchmarkRestart measures how soon conch answers again after a restart
// with restartConvs live conversations, each with its sandbox on the test
// engine: the real `conch up` binary, its SQLite store, the web chat. Every
// message is a turn that runs a command in the conversation's sandbox and
// then answers. "steady": conch running, one message to each conversation
// at once → every one answered (steadyRounds rounds); "restart": SIGTERM,
// start again, and as soon as it is up the same 20 messages (restartRounds
// rounds); "kill9" the same after kill -9. Each figure is from opening the
// conversations' chat sockets to the last answer; "ready" is from the start
// of the process to its web chat listening. It reports restart-p50-ms and
// steady-p50-ms (goals.tsv row 8), kill9 and ready as well.
//
//	go test -run '^$' -bench BenchmarkRestart -benchtime 1x ./cmd/conch/
func BenchmarkRestart(b *testing.B) {
	const steadyRounds, restartRounds = 5, 3
	e := engine.Docker(b)
	srv := fakellm.New(b)
	// A message runs a command in its sandbox; the command's result is
	// answered with the message's text.
	srv.Handle(func(r fakellm.Request) fakellm.Reply {
		if n := len(r.Messages); n > 0 && len(r.Messages[n-1].ToolResults) > 0 {
			return fakellm.Text("re: " + r.LastUserText())
		}
		return fakellm.ToolCall("bash", `{"command":"echo ran"}`)
	})
	dir := b.TempDir()
	buf := make([]byte, 4)
	rand.Read(buf)
	instance := "rb" + hex.EncodeToString(buf)
	addr := freeAddr(b)
	base := "http://" + addr
	env := append(testEnv(srv, fakellm.OpenAI, dir), engineEnv(b, e, instance)...)
	env = append(env, "CONCH_GATEWAY_LISTEN="+addr)
	instanceContainers(b, e.Client(b), instance) // removes them at the end

	var ready []time.Duration
	start := func() *conchProc {
		t0 := time.Now()
		p := startConch(b, env, "up")
		p.waitStderr(b, "Web chat: open "+base+"/login?token=")
		ready = append(ready, time.Since(t0))
		return p
	}
	p := start()
	wc := webLogin(b, env, base)
	ids := make([]string, restartConvs)
	last := make([]int64, restartConvs) // the Seq each conversation was read to
	for i := range ids {
		ids[i] = wc.newConversation(b)
	}
	round := 0
	// all sends one message to every conversation at once and returns
	// how long it took until every one was answered, from opening the
	// chat sockets.
	all := func() time.Duration {
		round++
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		t0 := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, len(ids))
		for i, id := range ids {
			wg.Go(func() {
				errs[i] = askOnce(ctx, wc, id, &last[i], fmt.Sprintf("round %d conversation %d", round, i))
			})
		}
		wg.Wait()
		d := time.Since(t0)
		for i, err := range errs {
			if err != nil {
				b.Fatalf("round %d, conversation %d: %v; stderr:\n%s", round, i, err, p.stderr)
			}
		}
		return d
	}
	all() // every conversation ran a command: its sandbox is up
	b.ResetTimer()
	steady := &sandboxdtest.Method{Name: "steady"}
	for range steadyRounds {
		steady.Samples = append(steady.Samples, all())
	}
	restart := &sandboxdtest.Method{Name: "restart"}
	kill9 := &sandboxdtest.Method{Name: "kill9"}
	for _, m := range []*sandboxdtest.Method{restart, kill9} {
		for range restartRounds {
			if m == kill9 {
				p.kill9Quiet(b)
			} else {
				p.sigterm(b)
			}
			p = start()
			m.Samples = append(m.Samples, all())
		}
	}
	b.StopTimer()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err == nil {
		p.cmd.Wait()
	}
	sandboxdtest.Report(b, []*sandboxdtest.Method{steady, restart, kill9}, "steady", time.Millisecond)
	b.ReportMetric(float64(sandboxdtest.Pct(ready[1:], 0.5))/float64(time.Millisecond), "ready-p50-ms")
	b.Logf("steady %v; restart (SIGTERM) %v; kill -9 %v; ready %v", steady.Samples, restart.Samples, kill9.Samples, ready)
}

// askOnce opens conversation id's chat socket after the Seq *last, sends
// text, and reads until the answer "re: text" came (moving *last).
func askOnce(ctx context.Context, wc *webClient, id string, last *int64, text string) error {
	u := "ws" + strings.TrimPrefix(wc.base, "http") + fmt.Sprintf("/api/chat?c=%s&after=%d", id, *last)
	conn, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: wc.client, HTTPHeader: http.Header{"Origin": {wc.base}}})
	if err != nil {
		return err
	}
	defer conn.CloseNow()
	conn.SetReadLimit(1 << 22)
	f, _ := json.Marshal(map[string]string{"type": "send", "id": fmt.Sprintf("m%d", time.Now().UnixNano()), "text": text})
	if err := conn.Write(ctx, websocket.MessageText, f); err != nil {
		return err
	}
	want := "re: " + text
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			return err
		}
		var fr struct {
			wireEvent
			Seq      int64 `json:"seq"`
			Error    string
			Messages []struct{ Role, Text string }
		}
		if err := json.Unmarshal(data, &fr); err != nil {
			return err
		}
		switch fr.Type {
		case "error":
			return fmt.Errorf("refused: %s", fr.Error)
		case "history":
			*last = fr.Seq
			for _, m := range fr.Messages {
				if m.Role == "assistant" && m.Text == want {
					return nil
				}
			}
		case "event":
			if fr.Event == nil {
				continue
			}
			if fr.Event.Type != "text_delta" && fr.Event.Type != "tool_progress" {
				*last = max(*last, fr.Event.Seq)
			}
			if fr.Event.Type == "message" && fr.Event.Data.Role == "assistant" && fr.Event.Data.Text == want {
				return nil
			}
		}
	}
}

// sigterm stops conch as a service manager does and waits for it.
func (p *conchProc) sigterm(tb testing.TB) {
	tb.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		tb.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		tb.Fatalf("conch up after SIGTERM: %v; stderr:\n%s", err, p.stderr)
	}
}

// kill9Quiet is kill9 for any testing.TB.
func (p *conchProc) kill9Quiet(tb testing.TB) {
	tb.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		tb.Fatal(err)
	}
	p.cmd.Wait()
}
