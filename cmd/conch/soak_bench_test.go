package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"conch/internal/testenv"
	"conch/internal/testenv/engine"
	"conch/internal/testenv/fakellm"
	tgfake "conch/internal/testenv/telegram"
	"conch/sqlite"
)

// The soak's size (make soak runs the defaults; smaller runs for a quick look:
// go test -run '^$' -bench '^BenchmarkSoak$' -benchtime 1x ./cmd/conch/ -args -soak.messages 500 -soak.duration 1m).
var (
	soakMessages = flag.Int("soak.messages", 10000, "BenchmarkSoak: messages sent in all")
	soakConvs    = flag.Int("soak.conversations", 100, "BenchmarkSoak: conversations (Telegram private chats) they are spread over")
	soakDuration = flag.Duration("soak.duration", 10*time.Minute, "BenchmarkSoak: the least time the messages are spread over")
	soakEvery    = flag.Duration("soak.sample", 10*time.Second, "BenchmarkSoak: how often conch's memory, goroutines and files are sampled")
	soakSettle   = flag.Duration("soak.settle", 3*time.Minute, "BenchmarkSoak: the most time given to settle after the load (sandboxes stop after 1m idle)")
	soakOut      = flag.String("soak.out", "", "BenchmarkSoak: a directory to keep conch's heap profiles and the time series in")
)

// soakRe finds a soak message in what the model is sent.
var soakRe = regexp.MustCompile(`soak c(\d+) m(\d+) (chat|bash|term)`)

// soakKind is what message m of conversation c asks for: every fifth
// conversation has a sandbox, where every tenth message runs a command and
// every 25th uses a terminal (the first opens it, the last closes it: an
// open terminal keeps its sandbox and its stream by design); the rest is
// talk.
func soakKind(c, m int) string {
	if c%5 != 0 {
		return "chat"
	}
	switch {
	case m%25 == 7:
		return "term"
	case m%10 == 3:
		return "bash"
	}
	return "chat"
}

// soakModel scripts the model for every conversation at once: each turn is
// decided from its own user message and the tool results after it, so
// conversations never take each other's replies.
type soakModel struct {
	perConv   int      // messages a conversation
	opened    sync.Map // conversation → its terminal was opened
	toolFails atomic.Int64
	unknown   atomic.Int64
}

func (s *soakModel) reply(req fakellm.Request) fakellm.Reply {
	at := -1
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" && soakRe.MatchString(req.Messages[i].Text) {
			at = i
			break
		}
	}
	if at < 0 {
		s.unknown.Add(1)
		return fakellm.Text("not a soak message")
	}
	m := soakRe.FindStringSubmatch(req.Messages[at].Text)
	conv, msg, kind := m[1], m[2], m[3]
	word := "soak-" + conv + "-" + msg
	answer := "ok c" + conv + " m" + msg
	calls := map[string]bool{}
	var results []fakellm.ToolResult
	for _, x := range req.Messages[at+1:] {
		for _, c := range x.ToolCalls {
			calls[c.Name] = true
		}
		results = append(results, x.ToolResults...)
	}
	failed := func(want ...string) bool {
		if len(results) == 0 {
			return true
		}
		last := results[len(results)-1]
		for _, w := range want {
			if !strings.Contains(last.Content, w) {
				return true
			}
		}
		return last.IsError
	}
	switch kind {
	case "bash":
		if !calls["bash"] {
			return fakellm.ToolCall("bash", `{"command":"echo `+word+`"}`)
		}
		if failed(word) {
			s.toolFails.Add(1)
			answer += " tool failed: " + strings.Join(strings.Fields(results[len(results)-1].Content), " ")
		}
	case "term":
		switch {
		case !calls["terminal_type"] && !calls["terminal_open"]:
			if _, had := s.opened.LoadOrStore(conv, true); !had {
				return fakellm.ToolCall("terminal_open", `{}`)
			}
			return fakellm.ToolCall("terminal_type", `{"tty":0,"expect":"bash","text":"echo `+word+`"}`)
		case !calls["terminal_type"]:
			if failed() {
				s.toolFails.Add(1)
			}
			return fakellm.ToolCall("terminal_type", `{"tty":0,"expect":"bash","text":"echo `+word+`"}`)
		case !calls["terminal_wait"]:
			return fakellm.ToolCall("terminal_wait", `{"timeout_seconds":20}`)
		case !calls["terminal_close"]:
			if failed(word, "exit 0") {
				s.toolFails.Add(1)
				answer += " tool failed: " + strings.Join(strings.Fields(results[len(results)-1].Content), " ")
			}
			if k, _ := strconv.Atoi(msg); k+25 >= s.perConv { // its last terminal message
				return fakellm.ToolCall("terminal_close", `{"tty":0}`)
			}
		default:
			if failed() {
				s.toolFails.Add(1)
				answer += " tool failed: " + strings.Join(strings.Fields(results[len(results)-1].Content), " ")
			}
		}
	}
	return fakellm.Text(answer)
}

// soakSample is one look at conch's process.
type soakSample struct {
	at         time.Duration
	answered   int
	rss, anon  int64 // bytes
	goroutines int
	fds        int
	heap, sys  int64 // Go's heap in use and all memory Go got from the OS (go_memstats_*)
	released   int64 // what Go gave back of it (go_memstats_heap_released_bytes)
	live       int64 // Go's heap objects (go_memstats_heap_alloc_bytes)
	store      int64 // conch.db + its WAL, bytes
}

// goRes is what of the anonymous memory Go's runtime accounts for at most:
// all it mapped less what it gave back (pages mapped and never touched
// count too, so nonGo is a floor of memory Go did not allocate).
func (s soakSample) goRes() int64 { return s.sys - s.released }

func (s soakSample) nonGo() int64 { return s.anon - s.goRes() }

// soakHTTP reads conch's debug pages and profiles without keeping a
// connection open between samples: it would count as one of conch's files.
// Uncompressed: gzip costs conch about 0.5 MB of allocation per response
// (compress/flate's writer).
var soakHTTP = &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DisableCompression: true}, Timeout: time.Minute}

// soakProc is `conch up` under the soak.
type soakProc struct {
	cmd     *exec.Cmd
	stderr  string // file
	metrics string // http://addr
	db      string
}

// sample looks at conch; goStats adds Go's memory figures (the heap
// profile's page, for which conch symbolizes every allocation site it
// sampled: not cheap).
func (p *soakProc) sample(b *testing.B, start time.Time, answered int, goStats bool) soakSample {
	s := soakSample{at: time.Since(start).Truncate(time.Second), answered: answered}
	pid := p.cmd.Process.Pid
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(st), "\n") {
			f := strings.Fields(l)
			if len(f) < 2 {
				continue
			}
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "VmRSS:":
				s.rss = kb << 10
			case "RssAnon:":
				s.anon = kb << 10
			}
		}
	} else {
		b.Errorf("conch's status: %v", err)
	}
	if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		s.fds = len(fds)
	}
	// Go's figures from metrics.pprof's pages (the index's goroutine count,
	// the heap profile's runtime.MemStats), not /metrics: a scrape lists
	// and inspects every sandbox (about 3 MB of allocation with 20 of them),
	// and sampled every 5 s it kept conch from ever going quiet for
	// internal/idletrim. Both pages allocate little (conch samples no heap
	// profile, runtime.MemProfileRate = 0).
	s.goroutines = -1
	if body, err := p.get("/debug/pprof/"); err == nil {
		if m := soakGoroutinesRe.FindStringSubmatch(body); m != nil {
			s.goroutines, _ = strconv.Atoi(m[1])
		}
	}
	if s.goroutines < 0 {
		b.Errorf("no goroutine count on %s/debug/pprof/", p.metrics)
	}
	if !goStats {
		return s.withStore(p)
	}
	if body, err := p.get("/debug/pprof/heap?debug=1"); err == nil {
		for _, l := range strings.Split(body, "\n") {
			name, v, ok := strings.Cut(strings.TrimPrefix(l, "# "), " = ")
			if !ok {
				continue
			}
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			switch name {
			case "HeapInuse":
				s.heap = n
			case "Sys":
				s.sys = n
			case "HeapReleased":
				s.released = n
			case "HeapAlloc":
				s.live = n
			}
		}
	}
	if s.sys == 0 {
		b.Errorf("no runtime.MemStats on %s/debug/pprof/heap?debug=1", p.metrics)
	}
	return s.withStore(p)
}

func (s soakSample) withStore(p *soakProc) soakSample {
	for _, f := range []string{p.db, p.db + "-wal"} {
		if fi, err := os.Stat(f); err == nil {
			s.store += fi.Size()
		}
	}
	return s
}

// heapProfile keeps conch's in-use heap (after a GC), its goroutines and
// its open files in the -soak.out directory.
func (p *soakProc) heapProfile(b *testing.B, name string) {
	if *soakOut == "" {
		return
	}
	p.fetch(b, "/debug/pprof/heap?gc=1", "soak-heap-"+name+".pb.gz")
	p.fetch(b, "/debug/pprof/goroutine?debug=1", "soak-goroutines-"+name+".txt")
	var fds strings.Builder
	dir := fmt.Sprintf("/proc/%d/fd", p.cmd.Process.Pid)
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		target, _ := os.Readlink(filepath.Join(dir, e.Name()))
		fmt.Fprintf(&fds, "%s %s\n", e.Name(), target)
	}
	if err := os.WriteFile(filepath.Join(*soakOut, "soak-fds-"+name+".txt"), []byte(fds.String()), 0o644); err != nil {
		b.Error(err)
	}
}

// soakGoroutinesRe finds the goroutine count in metrics.pprof's index
// (cmd/conch/pprof.go: "%8d  /debug/pprof/goroutine").
var soakGoroutinesRe = regexp.MustCompile(`(?m)^\s*(\d+)\s+/debug/pprof/goroutine$`)

// get reads one of conch's debug pages.
func (p *soakProc) get(path string) (string, error) {
	resp, err := soakHTTP.Get(p.metrics + path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", path, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

func (p *soakProc) fetch(b *testing.B, path, file string) {
	name := file
	resp, err := soakHTTP.Get(p.metrics + path)
	if err != nil {
		b.Errorf("heap profile %s: %v", name, err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Errorf("heap profile %s: %s", name, resp.Status)
		return
	}
	f, err := os.Create(filepath.Join(*soakOut, file))
	if err != nil {
		b.Error(err)
		return
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		b.Error(err)
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// BenchmarkSoak sends 10,000 messages over 100 Telegram conversations to the
// real `conch up` (the wire-exact Bot API fake, the real SQLite store, the
// test Docker engine), spread over at least 10 minutes: each person waits
// for the answer before writing again, every fifth conversation has a
// sandbox where some messages run a command and some use a terminal. It
// samples conch's resident and anonymous memory, goroutines (metrics.pprof's
// index) and open files over time, and the store's size; then it
// lets conch settle (idle sandboxes stop after a minute, idle connections
// close) and compares with the baseline taken before the load. Every
// message must be answered exactly once, in its own chat.
//
// Reported: rss-after-MiB and anon-after-MiB (settled), rss-growth-MiB (end
// of the load against the end of the warm-up, the first quarter of the
// messages), goroutines-delta and fds-delta (settled against the baseline),
// store-KiB-per-msg, msgs/s.
func BenchmarkSoak(b *testing.B) {
	testenv.Short(b)
	if *soakOut != "" {
		if err := os.MkdirAll(*soakOut, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	total, convs := *soakMessages, *soakConvs
	if convs < 1 || total < convs {
		b.Fatalf("-soak.messages %d over -soak.conversations %d", total, convs)
	}
	perConv := total / convs
	total = perConv * convs

	e := engine.Docker(b)
	model := &soakModel{perConv: perConv}
	llm := fakellm.New(b, fakellm.WithoutRecording())
	llm.Handle(model.reply)
	tg := tgfake.Start(b)
	dir := b.TempDir()

	var allow []string
	people := make([]tgfake.User, convs)
	for c := range people {
		people[c] = tgfake.Person(int64(700000+c), fmt.Sprintf("p%d", c), fmt.Sprintf("P%d", c))
		allow = append(allow, strconv.FormatInt(people[c].ID, 10))
	}
	buf := make([]byte, 4)
	rand.Read(buf)
	instance := "soak" + hex.EncodeToString(buf)
	metricsAddr := soakFreeAddr(b)
	var env []string
	for _, kv := range testEnv(llm, fakellm.OpenAI, dir) {
		if !strings.HasPrefix(kv, "CONCH_TEST_AS_MAIN=") { // the real binary, not the test binary as conch
			env = append(env, kv)
		}
	}
	env = append(env,
		"CONCH_GATEWAY_LISTEN="+soakFreeAddr(b),
		"CONCH_METRICS_LISTEN="+metricsAddr,
		"CONCH_METRICS_PPROF=true",
		"CONCH_TELEGRAM_BOT_TOKEN="+tg.Token,
		"CONCH_TELEGRAM_API_URL="+tg.URL,
		"CONCH_TELEGRAM_ALLOW_FROM="+strings.Join(allow, ","),
		"CONCH_SANDBOX_ENGINE="+e.Name,
		"CONCH_SANDBOX_HOST="+e.Host,
		"CONCH_SANDBOX_IMAGE="+e.Image,
		"CONCH_SANDBOX_CACHE_DIR="+e.CacheDir,
		"CONCH_SANDBOX_SANDBOXD_BINARY="+engine.SandboxdBinary(b),
		"CONCH_SANDBOX_IDLE_STOP=1m",
		"CONCH_INSTANCE_ID="+instance,
	)
	soakRemoveContainers(b, e.Client(b), instance)

	p := &soakProc{stderr: filepath.Join(dir, "stderr.txt"), metrics: "http://" + metricsAddr, db: filepath.Join(dir, "data", "conch.db")}
	errf, err := os.Create(p.stderr)
	if err != nil {
		b.Fatal(err)
	}
	defer errf.Close()
	// The real binary, built as make build does: the test binary would carry
	// the tests' code and data in its resident memory.
	p.cmd = exec.Command(soakBuild(b, dir), "up")
	p.cmd.Env = env
	p.cmd.Stderr = errf
	if err := p.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = p.cmd.Wait(); close(exited) }()
	b.Cleanup(func() {
		select {
		case <-exited:
		default:
			p.cmd.Process.Kill()
			<-exited
		}
		out, _ := os.ReadFile(p.stderr)
		if b.Failed() {
			b.Logf("conch's stderr (tail):\n%s", tailOf(out, 6000))
		}
		if *soakOut != "" { // conch's log beside the series (CONCH_LOG_LEVEL=debug shows the idle trims)
			_ = os.WriteFile(filepath.Join(*soakOut, "soak-stderr.txt"), out, 0o644)
		}
	})
	waitFor := func(what string, d time.Duration, cond func() bool) {
		b.Helper()
		deadline := time.Now().Add(d)
		for !cond() {
			select {
			case <-exited:
				b.Fatalf("conch exited while waiting for %s: %v", what, exitErr)
			default:
			}
			if time.Now().After(deadline) {
				b.Fatalf("no %s within %s", what, d)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("telegram polling", time.Minute, func() bool {
		out, _ := os.ReadFile(p.stderr)
		return strings.Contains(string(out), "telegram polling")
	})
	waitFor("/metrics", 30*time.Second, func() bool {
		resp, err := soakHTTP.Get(p.metrics + "/metrics")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
	time.Sleep(3 * time.Second) // the start's own work done
	start := time.Now()
	base := p.sample(b, start, 0, true)
	p.heapProfile(b, "0-before")

	// The watcher reads what the bot sent: an answer is a notifying
	// sendMessage "ok c<conv> m<msg>"; it must come in its own chat, once.
	var (
		mu        sync.Mutex
		counts    = make([][]int, convs)
		misplaced []string
		answered  atomic.Int64
	)
	for c := range counts {
		counts[c] = make([]int, perConv)
	}
	got := make([]chan int, convs)
	for c := range got {
		got[c] = make(chan int, perConv)
	}
	answerRe := regexp.MustCompile(`^ok c(\d+) m(\d+)\b`)
	chatOf := map[int64]int{}
	for c, u := range people {
		chatOf[u.ID] = c
	}
	watchDone := make(chan struct{})
	stopWatch := make(chan struct{})
	go func() {
		defer close(watchDone)
		seen := 0
		for {
			sent := tg.Sent(0)
			for _, s := range sent[seen:] {
				if s.Method != "sendMessage" || s.Silent {
					continue
				}
				m := answerRe.FindStringSubmatch(s.Text)
				c, _ := strconv.Atoi(m1(m, 1))
				k, _ := strconv.Atoi(m1(m, 2))
				mu.Lock()
				switch {
				case m == nil || c >= convs || k >= perConv:
					misplaced = append(misplaced, fmt.Sprintf("chat %d: unexpected %q", s.ChatID, s.Text))
				case chatOf[s.ChatID] != c || s.ChatID != people[c].ID:
					misplaced = append(misplaced, fmt.Sprintf("chat %d got conversation %d's answer %q", s.ChatID, c, s.Text))
				default:
					counts[c][k]++
					if counts[c][k] == 1 {
						answered.Add(1)
						got[c] <- k
					} else {
						misplaced = append(misplaced, fmt.Sprintf("chat %d: answered twice: %q", s.ChatID, s.Text))
					}
					if strings.Contains(s.Text, "tool failed") {
						misplaced = append(misplaced, fmt.Sprintf("chat %d: %q", s.ChatID, s.Text))
					}
				}
				mu.Unlock()
			}
			seen = len(sent)
			select {
			case <-stopWatch:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()

	// The sampler.
	var samples []soakSample
	var smu sync.Mutex
	sampleNow := func(goStats bool) soakSample {
		s := p.sample(b, start, int(answered.Load()), goStats)
		smu.Lock()
		samples = append(samples, s)
		smu.Unlock()
		return s
	}
	stopSampling := make(chan struct{})
	samplerDone := make(chan struct{})
	go func() {
		defer close(samplerDone)
		t := time.NewTicker(*soakEvery)
		defer t.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-t.C:
				sampleNow(true)
			}
		}
	}()

	// The load: one message per tick at most, each person waiting for the
	// answer to the last before writing again.
	tokens := make(chan struct{})
	loadDone := make(chan struct{})
	go func() {
		t := time.NewTicker(*soakDuration / time.Duration(total))
		defer t.Stop()
		for range total {
			select {
			case <-t.C:
			case <-loadDone:
				return
			}
			select {
			case tokens <- struct{}{}:
			case <-loadDone:
				return
			}
		}
	}()
	var wg sync.WaitGroup
	var stuck atomic.Int64
	b.ResetTimer()
	for c := range convs {
		wg.Go(func() {
			u := people[c]
			for k := range perConv {
				<-tokens
				tg.SendText(u, tgfake.PrivateChat(u), fmt.Sprintf("soak c%d m%d %s", c, k, soakKind(c, k)))
				select {
				case a := <-got[c]:
					if a != k {
						mu.Lock()
						misplaced = append(misplaced, fmt.Sprintf("conversation %d: answer to m%d while waiting for m%d", c, a, k))
						mu.Unlock()
					}
				case <-time.After(2 * time.Minute):
					stuck.Add(1)
					b.Errorf("conversation %d: no answer to m%d within 2 minutes", c, k)
					return
				}
			}
		})
	}
	wg.Wait()
	close(loadDone)
	loadTime := time.Since(start)
	b.StopTimer()
	close(stopSampling)
	<-samplerDone
	loaded := sampleNow(true)
	p.heapProfile(b, "1-loaded")

	// Settle: wait until goroutines and files are back at the baseline (or
	// the time is up), at least as long as idle sandboxes take to stop.
	settled := loaded
	settleStart := time.Now()
	// Without Go's figures: their page makes conch read its memory
	// statistics and allocate, which, every 5 s, kept conch from going
	// quiet for internal/idletrim, and each read maps back about 10 MiB of
	// the program's pages the idle trim had given back (the settled figure
	// was the measurement's). They are read once, after the last sample.
	for time.Since(settleStart) < *soakSettle {
		time.Sleep(5 * time.Second)
		settled = sampleNow(false)
		if time.Since(settleStart) > min(75*time.Second, *soakSettle/2) && settled.goroutines <= base.goroutines && settled.fds <= base.fds {
			break
		}
	}
	sampleNow(true) // Go's figures at the end, for the series
	p.heapProfile(b, "2-settled")
	time.Sleep(500 * time.Millisecond) // the last answers' sends are seen
	close(stopWatch)
	<-watchDone

	// Checks: every message answered exactly once, in its own chat.
	mu.Lock()
	missing := 0
	for c := range counts {
		for k, n := range counts[c] {
			if n == 0 {
				missing++
				if missing <= 10 {
					b.Errorf("conversation %d message %d never answered", c, k)
				}
			}
		}
	}
	for i, m := range misplaced {
		if i < 20 {
			b.Error(m)
		}
	}
	if missing > 0 || len(misplaced) > 0 {
		b.Errorf("%d messages unanswered, %d answers wrong (twice, misplaced or a tool failed) of %d", missing, len(misplaced), total)
	}
	mu.Unlock()
	if n := model.unknown.Load(); n > 0 {
		b.Errorf("the model was asked %d times without a soak message", n)
	}
	if n := model.toolFails.Load(); n > 0 {
		b.Errorf("%d tool calls in the sandbox failed", n)
	}

	// Stop conch; no turn is left unfinished in the store.
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		if exitErr != nil {
			b.Errorf("conch up exited with %v after SIGTERM", exitErr)
		}
	case <-time.After(60 * time.Second):
		b.Error("conch up did not stop within 60 s of SIGTERM")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if db, err := sqlite.Open(ctx, p.db); err != nil {
		b.Error(err)
	} else {
		if turns, err := db.UnfinishedTurns(ctx); err != nil || len(turns) > 0 {
			b.Errorf("unfinished turns after the soak: %d (%v)", len(turns), err)
		}
		db.Close()
	}

	// Figures.
	smu.Lock()
	defer smu.Unlock()
	warm := base
	for _, s := range samples {
		if s.answered >= total/4 {
			warm = s
			break
		}
	}
	var peak int64
	for _, s := range samples {
		peak = max(peak, s.rss)
	}
	var series strings.Builder
	// anon − Go's sys is memory Go did not allocate: SQLite's (modernc's
	// allocator maps its own), the stacks of threads in C-like code.
	// go res is sys less what Go released; non-go is anon less that (a
	// floor: pages Go mapped and never touched count as Go's).
	fmt.Fprintf(&series, "%8s %8s %8s %8s %8s %8s %8s %8s %8s %10s %5s %9s\n", "t", "answered", "rss MiB", "anon MiB", "heap MiB", "live MiB", "sys MiB", "go res", "non-go", "goroutines", "fds", "store MiB")
	row := func(s soakSample) {
		goCols := fmt.Sprintf("%8.1f %8.1f %8.1f %8.1f %8.1f", mib(s.heap), mib(s.live), mib(s.sys), mib(s.goRes()), mib(s.nonGo()))
		if s.sys == 0 { // not sampled
			goCols = fmt.Sprintf("%8s %8s %8s %8s %8s", "-", "-", "-", "-", "-")
		}
		fmt.Fprintf(&series, "%8s %8d %8.1f %8.1f %s %10d %5d %9.2f\n", s.at, s.answered, mib(s.rss), mib(s.anon), goCols, s.goroutines, s.fds, mib(s.store))
	}
	row(base)
	for _, s := range samples {
		row(s)
	}
	b.Logf("conch over the soak (baseline first; warm-up ends at %d answers, load ends at %s):\n%s", warm.answered, loaded.at, series.String())
	if *soakOut != "" {
		if err := os.WriteFile(filepath.Join(*soakOut, "soak-series.txt"), []byte(series.String()), 0o644); err != nil {
			b.Error(err)
		}
	}
	// The store grows linearly: bytes per message in the last quarter of the
	// load against the third (the first half holds the WAL's own growth).
	at := func(n int) soakSample {
		for _, s := range samples {
			if s.answered >= n {
				return s
			}
		}
		return loaded
	}
	half, three := at(total/2), at(total*3/4)
	if three.answered > half.answered && loaded.answered > three.answered {
		third := float64(three.store-half.store) / float64(three.answered-half.answered)
		fourth := float64(loaded.store-three.store) / float64(loaded.answered-three.answered)
		b.Logf("store: %.0f bytes a message in the third quarter, %.0f in the fourth; %.1f MiB for %d messages",
			third, fourth, mib(loaded.store), loaded.answered)
		if third > 0 && fourth > 0 { // a short run may sample no growth in a quarter
			b.ReportMetric(fourth/1024, "store-KiB-per-msg")
			b.ReportMetric(fourth/third, "store-growth-x-q3")
		}
	}
	b.ReportMetric(mib(settled.rss), "rss-after-MiB")
	b.ReportMetric(mib(settled.anon), "anon-after-MiB")
	b.ReportMetric(mib(peak), "rss-peak-MiB")
	b.ReportMetric(mib(base.rss), "rss-before-MiB")
	b.ReportMetric(mib(loaded.rss-warm.rss), "rss-growth-MiB")
	b.ReportMetric(mib(loaded.anon-warm.anon), "anon-growth-MiB")
	// Where the growth is: Go's resident memory (all it mapped less what it
	// released) and the rest (modernc's libc allocator: SQLite).
	b.ReportMetric(mib(loaded.goRes()-warm.goRes()), "go-growth-MiB")
	b.ReportMetric(mib(loaded.nonGo()-warm.nonGo()), "nongo-growth-MiB")
	b.ReportMetric(float64(settled.goroutines-base.goroutines), "goroutines-delta")
	b.ReportMetric(float64(settled.fds-base.fds), "fds-delta")
	b.ReportMetric(float64(loaded.answered)/loadTime.Seconds(), "msgs/s")
	b.ReportMetric(0, "ns/op")
}

// soakBuild builds conch as make build does (static, stripped) into dir.
func soakBuild(b *testing.B, dir string) string {
	b.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		testenv.Missing(b, "go", "the soak builds the conch binary with the go command")
	}
	bin := filepath.Join(dir, "conch")
	build := exec.Command(goBin, "build", "-tags", "goolm", "-ldflags", "-s -w", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build ./cmd/conch: %v\n%s", err, out)
	}
	return bin
}

func m1(m []string, i int) string {
	if len(m) <= i {
		return ""
	}
	return m[i]
}

func tailOf(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func soakFreeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// soakRemoveContainers removes the instance's containers and their
// workspace volumes when the benchmark ends.
func soakRemoveContainers(tb testing.TB, api *client.Client, instance string) {
	tb.Cleanup(func() {
		ctx := context.Background()
		res, err := api.ContainerList(ctx, client.ContainerListOptions{
			All: true, Filters: make(client.Filters).Add("label", "conch.instance="+instance),
		})
		if err != nil {
			tb.Logf("list the soak's containers: %v", err)
			return
		}
		for _, c := range res.Items {
			api.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		}
		vols, err := api.VolumeList(ctx, client.VolumeListOptions{Filters: make(client.Filters).Add("label", "conch.instance="+instance)})
		if err != nil {
			tb.Logf("list the soak's volumes: %v", err)
			return
		}
		for _, v := range vols.Items {
			api.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true})
		}
	})
}
