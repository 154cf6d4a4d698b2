package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"conch/internal/binsize"
	"conch/internal/testenv"
	"conch/internal/testenv/engine"
	"conch/internal/testenv/fakellm"
)

// releaseBinary builds conch as a release is (internal/binsize.Build:
// CGO_ENABLED=0, -trimpath, the release tags) into a directory removed when
// the benchmark ends: stripped (what users download) and, with symbols, the
// same build unstripped (its symbols attribute the bytes). Compiling is
// cached by the go command; a build after the first is a link.
func releaseBinary(tb testing.TB, symbols bool) (stripped, unstripped string) {
	tb.Helper()
	dir := tb.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	stripped = filepath.Join(dir, "conch")
	if err := binsize.Build(ctx, "../..", "./cmd/conch", stripped, true); err != nil {
		tb.Fatal(err)
	}
	if symbols {
		unstripped = filepath.Join(dir, "conch.symbols")
		if err := binsize.Build(ctx, "../..", "./cmd/conch", unstripped, false); err != nil {
			tb.Fatal(err)
		}
	}
	return stripped, unstripped
}

// BenchmarkReleaseBinary builds conch as `make release` does (every default
// feature, stripped) and reports its size in MB (10^6 bytes) and MiB, and
// logs the 15 largest modules and packages (go run
// ./internal/binsize/cmd/binsize prints the same tables).
func BenchmarkReleaseBinary(b *testing.B) {
	stripped, unstripped := releaseBinary(b, true)
	r, err := binsize.Attribute(unstripped, stripped)
	if err != nil {
		b.Fatal(err)
	}
	var tables bytes.Buffer
	if err := binsize.Table(&tables, "module", r.Modules, r.File, 15); err != nil {
		b.Fatal(err)
	}
	tables.WriteString("\n")
	if err := binsize.Table(&tables, "package", r.Packages, r.File, 15); err != nil {
		b.Fatal(err)
	}
	b.Logf("stripped release binary %.2f MB; the largest:\n%s", binsize.MB(r.File), tables.String())
	for range b.N {
	}
	b.ReportMetric(binsize.MB(r.File), "MB")
	b.ReportMetric(float64(r.File)/(1<<20), "MiB")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkIdleRSS runs the release binary's `conch up` with 20 web
// conversations, each of which had a turn that ran a command in its sandbox
// (the test dockerd), then leaves it idle and reports what stays resident:
// rss-MiB (VmRSS), anon-MiB (RssAnon: heap, stacks, runtime), file-MiB
// (RssFile: the binary's own pages, mostly), read from /proc once memory has
// settled. CONCH_BENCH_BINARY=path measures that binary instead (an older
// build, for a before/after in one sitting).
func BenchmarkIdleRSS(b *testing.B) {
	testenv.Short(b)
	const conversations = 20
	bin := os.Getenv("CONCH_BENCH_BINARY") // another build to compare, e.g. main's
	if bin == "" {
		bin, _ = releaseBinary(b, false)
	}
	e := engine.Docker(b)
	srv := fakellm.New(b)
	// Each turn runs one command in its conversation's sandbox, then answers.
	srv.Handle(func(r fakellm.Request) fakellm.Reply {
		if last := r.Messages[len(r.Messages)-1]; len(last.ToolResults) > 0 {
			if res := last.ToolResults[0].Content; !strings.Contains(res, "in-sandbox") {
				return fakellm.Text("the command failed: " + res)
			}
			return fakellm.Text("re: " + r.LastUserText())
		}
		return fakellm.ToolCall("bash", `{"command":"echo in-sandbox"}`)
	})
	dir := b.TempDir()
	addr := freeAddr(b)
	base := "http://" + addr
	instance := "rss" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	env := append(testEnv(srv, fakellm.OpenAI, dir), engineEnv(b, e, instance)...)
	env = append(env, "CONCH_GATEWAY_LISTEN="+addr)
	containers := instanceContainers(b, e.Client(b), instance)

	up := exec.Command(bin, "up")
	up.Env = env
	var stderr testenv.SyncBuffer
	up.Stderr = &stderr
	if err := up.Start(); err != nil {
		b.Fatal(err)
	}
	stop := func() {
		if up.ProcessState == nil {
			up.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { up.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				up.Process.Kill()
				<-done
			}
		}
	}
	b.Cleanup(stop)
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(stderr.String(), "Web chat: open "+base) {
		if time.Now().After(deadline) || up.ProcessState != nil {
			b.Fatalf("conch up never served the web chat:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	wc := releaseWebLogin(b, bin, env, base)
	var wg sync.WaitGroup
	for i := range conversations {
		wg.Go(func() {
			id := wc.newConversationTB(b)
			u := "ws" + strings.TrimPrefix(base, "http") + "/api/chat?c=" + id + "&after=0"
			conn, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: wc.client, HTTPHeader: http.Header{"Origin": {base}}})
			if err != nil {
				b.Error(err)
				return
			}
			defer conn.CloseNow()
			text := fmt.Sprint("hello ", i)
			f, _ := json.Marshal(map[string]string{"type": "send", "id": fmt.Sprint("m", i), "text": text})
			if err := conn.Write(ctx, websocket.MessageText, f); err != nil {
				b.Error(err)
				return
			}
			for {
				_, data, err := conn.Read(ctx)
				if err != nil {
					b.Errorf("conversation %d: %v", i, err)
					return
				}
				var ev wireEvent
				if json.Unmarshal(data, &ev) == nil && ev.Event != nil && ev.Event.Data.Role == "assistant" {
					if ev.Event.Data.Text != "re: "+text {
						b.Errorf("conversation %d answered %q", i, ev.Event.Data.Text)
					}
					conn.Close(websocket.StatusNormalClosure, "")
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	if n := srv.Count(); n != 2*conversations {
		b.Fatalf("the model was asked %d times, want %d (a tool call and an answer per turn)", n, 2*conversations)
	}
	if got := len(containers()); got < conversations {
		last, _ := srv.Last()
		b.Fatalf("%d sandboxes, want one per conversation (%d); a tool result: %+v; conch's log:\n%s", got, conversations, last.ToolResults(), stderr.String())
	}

	// Idle: nothing arrives; memory settles once the runtime has returned
	// what the turns used (the scavenger works in the background).
	b.ResetTimer()
	var st procStatus
	for range b.N {
		st = settledStatus(b, up.Process.Pid)
	}
	b.StopTimer()
	b.Logf("idle after %d conversations: VmRSS %.1f MiB = RssAnon %.1f + RssFile %.1f + RssShmem %.1f; VmHWM %.1f MiB",
		conversations, st.mib("VmRSS"), st.mib("RssAnon"), st.mib("RssFile"), st.mib("RssShmem"), st.mib("VmHWM"))
	b.Logf("resident per mapping of %s (KiB): %s", filepath.Base(bin), binaryMappings(b, up.Process.Pid, bin))
	if f := os.Getenv("CONCH_BENCH_STDERR"); f != "" { // to read conch's log (GODEBUG=gctrace=1 shows the heap)
		if err := os.WriteFile(f, []byte(stderr.String()), 0o644); err != nil {
			b.Error(err)
		}
	}
	b.ReportMetric(st.mib("VmRSS"), "rss-MiB")
	b.ReportMetric(st.mib("RssAnon"), "anon-MiB")
	b.ReportMetric(st.mib("RssFile"), "file-MiB")
	b.ReportMetric(0, "ns/op")
}

// procStatus is /proc/PID/status's memory lines, in KiB.
type procStatus map[string]int64

func (s procStatus) mib(key string) float64 { return float64(s[key]) / 1024 }

func readStatus(tb testing.TB, pid int) procStatus {
	tb.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	st := procStatus{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if f := strings.Fields(v); ok && len(f) == 2 && f[1] == "kB" {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			st[k] = n
		}
	}
	if st["VmRSS"] == 0 {
		tb.Fatalf("/proc/%d/status has no VmRSS", pid)
	}
	return st
}

// settledStatus samples the process's memory every 2 s until VmRSS has
// moved less than 256 KiB over the last 30 s — longer than two periods of
// conch's idle trim (internal/idletrim), so the trim after the last turn has
// run — and returns the last sample. It gives up waiting after 3 minutes
// (past the runtime's forced collection every 2 minutes).
func settledStatus(tb testing.TB, pid int) procStatus {
	tb.Helper()
	const window = 15 // samples: 30 s
	var last []int64
	deadline := time.Now().Add(3 * time.Minute)
	for {
		st := readStatus(tb, pid)
		last = append(last, st["VmRSS"])
		if n := len(last); n >= window {
			lo, hi := last[n-window], last[n-window]
			for _, v := range last[n-window:] {
				lo, hi = min(lo, v), max(hi, v)
			}
			if hi-lo < 256 || time.Now().After(deadline) {
				return st
			}
		}
		time.Sleep(2 * time.Second)
	}
}

// releaseWebLogin logs in to the web chat with a link from the release
// binary's `conch web url` (webLogin does the same with the test binary).
func releaseWebLogin(tb testing.TB, bin string, env []string, base string) *webClient {
	tb.Helper()
	cmd := exec.Command(bin, "web", "url")
	cmd.Env = env
	out, err := cmd.Output()
	link := strings.TrimSpace(string(out))
	if err != nil || !strings.Contains(link, "/login?token=") {
		tb.Fatalf("conch web url: %q, %v", out, err)
	}
	jar, _ := cookiejar.New(nil)
	c := &webClient{base: base, client: &http.Client{Jar: jar}}
	resp, err := c.client.Get(link)
	if err != nil {
		tb.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Conch-Token") == "" {
		tb.Fatalf("login: %s, no request token", resp.Status)
	}
	c.client.Transport = tokenTransport{resp.Header.Get("X-Conch-Token")}
	return c
}

// newConversationTB is newConversation for benchmarks.
func (c *webClient) newConversationTB(tb testing.TB) string {
	tb.Helper()
	req, _ := http.NewRequest("POST", c.base+"/api/conversations", strings.NewReader(`{}`))
	req.Header.Set("Origin", c.base)
	resp, err := c.client.Do(req)
	if err != nil {
		tb.Error(err)
		return ""
	}
	defer resp.Body.Close()
	var conv struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&conv); err != nil || conv.ID == "" {
		tb.Errorf("new conversation: %s, %v", resp.Status, err)
	}
	return conv.ID
}

// binaryMappings sums /proc/PID/smaps's Rss per mapping of the binary (its
// code, read-only data with the pc tables, data), and of the anonymous
// rest, to say which part of RssFile and RssAnon is which.
func binaryMappings(tb testing.TB, pid int, bin string) string {
	tb.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		tb.Fatal(err)
	}
	var out []string
	var name string
	anon := map[string]int64{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":"):
			// address, permissions, offset, device, inode[, path]
			switch {
			case len(f) >= 6 && f[5] == bin:
				name = "binary " + f[1]
			case len(f) >= 6:
				name = f[5]
			default:
				name = "anon " + f[1]
			}
		case len(f) == 3 && f[0] == "Rss:":
			n, _ := strconv.ParseInt(f[1], 10, 64)
			if strings.HasPrefix(name, "binary ") {
				out = append(out, fmt.Sprintf("%s %d", name, n))
			} else {
				anon[name] += n
			}
		}
	}
	for k, v := range anon {
		if v >= 512 {
			out = append(out, fmt.Sprintf("%s %d", k, v))
		}
	}
	return strings.Join(out, ", ")
}
