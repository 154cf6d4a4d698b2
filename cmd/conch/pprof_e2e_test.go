package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"conch/internal/testenv"
	"conch/internal/testenv/fakellm"
	tgfake "conch/internal/testenv/telegram"
)

// TestUpMetricsRuntimeAndPprof runs `conch up` with metrics.listen: /metrics
// there carries the standard go_* and process_* figures beside conch_*;
// Go's profiles are served there only with metrics.pprof, never on
// gateway.listen, and metrics.pprof on a non-loopback address is refused.
func TestUpMetricsRuntimeAndPprof(t *testing.T) {
	srv := fakellm.New(t)
	get := func(url string) (int, []byte) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	waitUp := func(p *conchProc, url string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for {
			if resp, err := http.Get(url); err == nil {
				resp.Body.Close()
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s never answered; stderr:\n%s", url, p.stderr)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	for _, pprof := range []bool{true, false} {
		gw, metrics := freeAddr(t), freeAddr(t)
		env := append(testEnv(srv, fakellm.OpenAI, t.TempDir()), "CONCH_GATEWAY_LISTEN="+gw, "CONCH_METRICS_LISTEN="+metrics)
		if pprof {
			env = append(env, "CONCH_METRICS_PPROF=true")
		}
		p := startConch(t, env, "up")
		waitUp(p, "http://"+metrics+"/metrics")
		code, body := get("http://" + metrics + "/metrics")
		for _, want := range []string{"\ngo_goroutines ", "\nprocess_open_fds ", "\nprocess_resident_memory_bytes ", "\ngo_memstats_heap_inuse_bytes ", "conch_turns_running "} {
			if code != http.StatusOK || !bytes.Contains(body, []byte(want)) {
				t.Fatalf("/metrics (%d) lacks %q", code, strings.TrimSpace(want))
			}
		}
		code, body = get("http://" + metrics + "/debug/pprof/heap")
		switch {
		case pprof && (code != http.StatusOK || !bytes.HasPrefix(body, []byte{0x1f, 0x8b})): // a gzipped profile
			t.Fatalf("heap profile with metrics.pprof: %d %q", code, body[:min(len(body), 200)])
		case !pprof && code != http.StatusNotFound:
			t.Fatalf("heap profile without metrics.pprof: %d, want 404", code)
		}
		if pprof {
			// The heap is sampled (main turns sampling off unless metrics.pprof is on).
			code, body = get("http://" + metrics + "/debug/pprof/heap?debug=1")
			var inuse, inuseB, allocs, allocsB, rate int64
			if _, err := fmt.Sscanf(string(body), "heap profile: %d: %d [%d: %d] @ heap/%d", &inuse, &inuseB, &allocs, &allocsB, &rate); code != http.StatusOK || err != nil || allocs == 0 || rate != 2*512*1024 {
				t.Fatalf("heap profile (debug=1): %d %v: %q", code, err, body[:min(len(body), 200)])
			}
			if code, body = get("http://" + metrics + "/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !bytes.Contains(body, []byte("goroutine profile: total")) {
				t.Fatalf("goroutine profile: %d", code)
			}
			if code, _ = get("http://" + metrics + "/debug/pprof/cmdline"); code == http.StatusOK {
				t.Fatal("the command line is served")
			}
			// The index names the profiles; a CPU profile is a gzipped
			// profile too; what is not served says so.
			if code, body = get("http://" + metrics + "/debug/pprof/"); code != http.StatusOK || !bytes.Contains(body, []byte("/debug/pprof/heap")) || !bytes.Contains(body, []byte("/debug/pprof/profile")) {
				t.Fatalf("index: %d %q", code, body)
			}
			if code, body = get("http://" + metrics + "/debug/pprof/profile?seconds=1"); code != http.StatusOK || !bytes.HasPrefix(body, []byte{0x1f, 0x8b}) {
				t.Fatalf("CPU profile: %d %q", code, body[:min(len(body), 200)])
			}
			for path, want := range map[string]int{
				"/debug/pprof/nosuch":            http.StatusNotFound,
				"/debug/pprof/heap?seconds=5":    http.StatusBadRequest,
				"/debug/pprof/profile?seconds=x": http.StatusBadRequest,
				"/debug/pprof/trace":             http.StatusNotFound,
			} {
				if code, body = get("http://" + metrics + path); code != want {
					t.Fatalf("%s: %d %q, want %d", path, code, body, want)
				}
			}
			if !strings.Contains(p.stderr.String(), "metrics.pprof") {
				t.Fatalf("no warning that profiles are served:\n%s", p.stderr)
			}
		}
		if code, _ = get("http://" + gw + "/debug/pprof/heap"); code == http.StatusOK {
			t.Fatal("profiles served on gateway.listen")
		}
		p.kill9(t)
	}

	// Profiles without login on a non-loopback address: refused, naming the key.
	env := append(testEnv(srv, fakellm.OpenAI, t.TempDir()), "CONCH_GATEWAY_LISTEN="+freeAddr(t),
		"CONCH_METRICS_LISTEN=0.0.0.0:0", "CONCH_METRICS_PPROF=true")
	p := startConch(t, env, "up")
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(p.stderr.String(), "metrics.pprof") {
			t.Fatalf("conch up with pprof on 0.0.0.0: %v; stderr:\n%s", err, p.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("conch up started with pprof on 0.0.0.0; stderr:\n%s", p.stderr)
	}
}

// TestUpMetricsCountSandboxes: conch up on the test engine, a turn whose
// command makes its conversation's sandbox: /metrics counts it, as the one
// listing of the instance's containers says (SandboxCounts), with no
// listing error.
func TestUpMetricsCountSandboxes(t *testing.T) {
	testenv.Short(t)
	llm := fakellm.New(t)
	tg := tgfake.Start(t)
	alice := tgfake.Person(4747, "alice", "Alice")
	chat := tgfake.PrivateChat(alice)
	env, _ := approvalsEnv(t, llm, tg, "4747")
	metrics := freeAddr(t)
	env = append(env, "CONCH_METRICS_LISTEN="+metrics)
	llm.Push(fakellm.ToolCall("bash", `{"command":"echo in-sandbox"}`), fakellm.Text("Done."))
	p := startConch(t, env, "up")
	p.waitStderr(t, "telegram polling")
	tg.SendText(alice, chat, "run something")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := tg.Wait(ctx, func() bool {
		for _, s := range tg.Messages(alice.ID) {
			if s.Text == "Done." {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("no answer; stderr:\n%s", p.stderr)
	}
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"\nconch_sandboxes{kind=\"conversation\",state=\"running\"} 1\n", "\nconch_sandbox_list_errors 0\n"} {
		if !bytes.Contains(body, []byte(want)) {
			t.Fatalf("/metrics lacks %q:\n%s", strings.TrimSpace(want), grepLines(body, "conch_sandbox"))
		}
	}
}

// grepLines returns body's lines that contain s.
func grepLines(body []byte, s string) string {
	var out []string
	for _, l := range strings.Split(string(body), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
