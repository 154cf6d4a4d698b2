package sandboxd_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"conch"
	"conch/internal/testenv"
	"conch/sandbox/sandboxd"
	"conch/sandbox/sandboxd/sandboxdtest"
)

func TestMain(m *testing.M) {
	sandboxdtest.ServeIfChild()
	os.Exit(m.Run())
}

// transports runs a test against the agent in-process over pipes, as a
// real subprocess speaking over its stdio, and over the unix socket
// transport (listener, key handshake).
var transports = []struct {
	name string
	new  func(testing.TB, string) *sandboxdtest.Host
}{
	{"inprocess", sandboxdtest.HostSandbox},
	{"subprocess", sandboxdtest.SubprocessSandbox},
	{"socket", sandboxdtest.SocketSandbox},
}

func forEachTransport(t *testing.T, fn func(t *testing.T, h *sandboxdtest.Host)) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			fn(t, tr.new(t, t.TempDir()))
		})
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestExecRoundTrip(t *testing.T) {
	forEachTransport(t, func(t *testing.T, h *sandboxdtest.Host) {
		ctx := ctxT(t)
		if err := os.MkdirAll(h.WorkspacePath("sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name     string
			req      conch.ExecRequest
			wantOut  string
			wantCode int
		}{
			{"echo", conch.ExecRequest{Argv: []string{"echo", "hello", "world"}}, "hello world\n", 0},
			{"exit code", conch.ExecRequest{Argv: []string{"sh", "-c", "echo no; exit 3"}}, "no\n", 3},
			{"args are not split or expanded", conch.ExecRequest{Argv: []string{"printf", "%s|", "a b", "$HOME", "*"}}, "a b|$HOME|*|", 0},
			{"default dir is the workspace", conch.ExecRequest{Argv: []string{"pwd"}}, h.WorkspacePath("") + "\n", 0},
			{"relative dir", conch.ExecRequest{Argv: []string{"pwd"}, Dir: "sub"}, h.WorkspacePath("sub") + "\n", 0},
			{"env", conch.ExecRequest{Argv: []string{"sh", "-c", "echo $FOO"}, Env: []string{"FOO=bar baz"}}, "bar baz\n", 0},
			{"stderr", conch.ExecRequest{Argv: []string{"sh", "-c", "echo oops >&2"}}, "oops\n", 0},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				res, err := h.Exec(ctx, tt.req)
				if err != nil {
					t.Fatalf("Exec: %v", err)
				}
				if got := string(res.Output); got != tt.wantOut {
					t.Errorf("output: got %q, want %q", got, tt.wantOut)
				}
				if res.ExitCode != tt.wantCode {
					t.Errorf("exit code: got %d, want %d", res.ExitCode, tt.wantCode)
				}
				if res.Stopped != conch.StoppedNone || res.Truncated {
					t.Errorf("got stopped=%q truncated=%v, want neither", res.Stopped, res.Truncated)
				}
				if res.Duration <= 0 {
					t.Errorf("duration: got %v, want > 0", res.Duration)
				}
			})
		}
	})
}

func TestExecErrors(t *testing.T) {
	forEachTransport(t, func(t *testing.T, h *sandboxdtest.Host) {
		ctx := ctxT(t)
		if err := os.WriteFile(h.WorkspacePath("notexec"), []byte("#!/bin/sh\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name     string
			req      conch.ExecRequest
			wantKind conch.ErrorKind
			wantText string
		}{
			{"program not found", conch.ExecRequest{Argv: []string{"no-such-program-xyz"}}, conch.KindNotFound, `"no-such-program-xyz" not found`},
			{"path not found", conch.ExecRequest{Argv: []string{"./missing.sh"}}, conch.KindNotFound, "does not exist"},
			{"not executable", conch.ExecRequest{Argv: []string{"./notexec"}}, conch.KindInvalid, "not executable"},
			{"NUL in argument", conch.ExecRequest{Argv: []string{"echo", "a\x00b"}}, conch.KindInvalid, "argument 1 contains a NUL byte"},
			{"NUL in env", conch.ExecRequest{Argv: []string{"true"}, Env: []string{"A=\x00"}}, conch.KindInvalid, "NUL"},
			{"bad env", conch.ExecRequest{Argv: []string{"true"}, Env: []string{"novalue"}}, conch.KindInvalid, "KEY=value"},
			{"empty argv", conch.ExecRequest{}, conch.KindInvalid, "no program"},
			{"missing dir", conch.ExecRequest{Argv: []string{"true"}, Dir: "/workspace/nope"}, conch.KindNotFound, "working directory /workspace/nope does not exist"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := h.Exec(ctx, tt.req)
				if err == nil {
					t.Fatal("Exec: got nil error, want one")
				}
				if got := conch.KindOf(err); got != tt.wantKind {
					t.Errorf("kind: got %q, want %q (err %v)", got, tt.wantKind, err)
				}
				if !strings.Contains(conch.UserMessage(err), tt.wantText) {
					t.Errorf("user message: got %q, want it to contain %q", conch.UserMessage(err), tt.wantText)
				}
			})
		}
		// None of these broke the stream.
		if _, err := h.Exec(ctx, conch.ExecRequest{Argv: []string{"true"}}); err != nil {
			t.Fatalf("Exec after errors: %v", err)
		}
		if got := h.Dials(); got != 1 {
			t.Errorf("dials: got %d, want 1 (an error result must not break the stream)", got)
		}
	})
}

func TestExecConcurrent(t *testing.T) {
	forEachTransport(t, func(t *testing.T, h *sandboxdtest.Host) {
		ctx := ctxT(t)
		const n = 24
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() {
				want := fmt.Sprintf("job %d\n", i)
				res, err := h.Exec(ctx, conch.ExecRequest{Argv: []string{"sh", "-c", "sleep 0.0$1; echo job $1", "sh", strconv.Itoa(i % 10)}})
				if err != nil {
					errs <- err
					return
				}
				_ = want
				if got := string(res.Output); got != fmt.Sprintf("job %d\n", i%10) {
					errs <- fmt.Errorf("job %d: got %q", i, got)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

func TestExecOutputOrder(t *testing.T) {
	forEachTransport(t, func(t *testing.T, h *sandboxdtest.Host) {
		ctx := ctxT(t)
		script := `for i in $(seq 1 200); do echo out$i; echo err$i >&2; done`
		var streamed bytes.Buffer
		res, err := h.Exec(ctx, conch.ExecRequest{
			Argv:     []string{"sh", "-c", script},
			OnOutput: func(b []byte) { streamed.Write(b) },
		})
		if err != nil {
			t.Fatal(err)
		}
		var want strings.Builder
		for i := 1; i <= 200; i++ {
			fmt.Fprintf(&want, "out%d\nerr%d\n", i, i)
		}
		if got := string(res.Output); got != want.String() {
			t.Errorf("Output out of order: got %q…", got[:min(len(got), 80)])
		}
		if got := streamed.String(); got != want.String() {
			t.Errorf("OnOutput out of order: got %q…", got[:min(len(got), 80)])
		}
	})
}

func TestExecOutputLimit(t *testing.T) {
	h := sandboxdtest.HostSandbox(t, t.TempDir())
	ctx := ctxT(t)
	var seen int
	res, err := h.Exec(ctx, conch.ExecRequest{
		Argv:        []string{"head", "-c", "100000", "/dev/zero"},
		OutputLimit: 1000,
		OnOutput:    func(b []byte) { seen += len(b) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Output) != 1000 || !res.Truncated {
		t.Errorf("got %d bytes truncated=%v, want 1000 truncated=true", len(res.Output), res.Truncated)
	}
	if seen != 100000 {
		t.Errorf("OnOutput saw %d bytes, want 100000", seen)
	}
	if res.Stopped != conch.StoppedNone || res.ExitCode != 0 {
		t.Errorf("got stopped=%q exit=%d, want a normal exit", res.Stopped, res.ExitCode)
	}
}

func TestExecOutputCeiling(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "workspace"), 0o755)
	srv := sandboxdtest.NewServer(dir)
	c := sandboxd.NewClient(pipeDial(t, srv), sandboxd.ClientOptions{OutputCeiling: 1 << 20})
	defer c.Close()
	var seen int64
	res, err := c.Exec(ctxT(t), conch.ExecRequest{
		Argv:     []string{"cat", "/dev/zero"},
		Timeout:  time.Minute,
		OnOutput: func(b []byte) { seen += int64(len(b)) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stopped != conch.StoppedOutput {
		t.Errorf("stopped: got %q, want %q", res.Stopped, conch.StoppedOutput)
	}
	if !res.Truncated || seen != 1<<20 {
		t.Errorf("got truncated=%v after %d bytes, want truncated after exactly %d", res.Truncated, seen, 1<<20)
	}

	// A long-lived stream (no Timeout) is not cut at the ceiling.
	seen = 0
	res, err = c.Exec(ctxT(t), conch.ExecRequest{
		Argv:     []string{"head", "-c", "3000000", "/dev/zero"},
		OnOutput: func(b []byte) { seen += int64(len(b)) },
	})
	if err != nil || res.Stopped != conch.StoppedNone || seen != 3000000 {
		t.Errorf("stream without a timeout: got stopped=%q after %d bytes, %v; want all 3000000", res.Stopped, seen, err)
	}
}

func TestExecStdin(t *testing.T) {
	forEachTransport(t, func(t *testing.T, h *sandboxdtest.Host) {
		ctx := ctxT(t)
		t.Run("reader", func(t *testing.T) {
			res, err := h.Exec(ctx, conch.ExecRequest{Argv: []string{"cat"}, Stdin: strings.NewReader("hello\nworld\n")})
			if err != nil {
				t.Fatal(err)
			}
			if got := string(res.Output); got != "hello\nworld\n" {
				t.Errorf("got %q, want %q", got, "hello\nworld\n")
			}
		})
		t.Run("large both ways", func(t *testing.T) {
			in := bytes.Repeat([]byte("0123456789abcdef"), 4<<20/16) // 4 MiB through cat
			var got bytes.Buffer
			res, err := h.Exec(ctx, conch.ExecRequest{
				Argv:        []string{"cat"},
				Stdin:       bytes.NewReader(in),
				OutputLimit: 1,
				OnOutput:    func(b []byte) { got.Write(b) },
			})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), in) {
				t.Errorf("cat returned %d bytes, want the %d sent", got.Len(), len(in))
			}
			if res.ExitCode != 0 {
				t.Errorf("exit: got %d, want 0", res.ExitCode)
			}
		})
		t.Run("interactive", func(t *testing.T) {
			// Each line must come back before the next is sent: stdin and
			// output really stream.
			pr, pw := io.Pipe()
			lines := make(chan string, 10)
			done := make(chan error, 1)
			var mu sync.Mutex
			var buf strings.Builder
			go func() {
				_, err := h.Exec(ctx, conch.ExecRequest{Argv: []string{"cat"}, Stdin: pr, OnOutput: func(b []byte) {
					mu.Lock()
					buf.Write(b)
					s := buf.String()
					mu.Unlock()
					for {
						line, rest, ok := strings.Cut(s, "\n")
						if !ok {
							break
						}
						lines <- line
						mu.Lock()
						buf.Reset()
						buf.WriteString(rest)
						mu.Unlock()
						s = rest
					}
				}})
				done <- err
			}()
			for i := range 3 {
				want := fmt.Sprintf("line %d", i)
				if _, err := io.WriteString(pw, want+"\n"); err != nil {
					t.Fatal(err)
				}
				select {
				case got := <-lines:
					if got != want {
						t.Errorf("got %q, want %q", got, want)
					}
				case <-ctx.Done():
					t.Fatalf("no echo of %q: %v", want, ctx.Err())
				}
			}
			pw.Close()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	})
}

// processGone reports whether pid no longer runs (gone or a zombie).
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return strings.HasPrefix(rest, "Z")
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("background child %d still runs after the exec was killed", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestExecTimeoutKillsProcessGroup(t *testing.T) {
	forEachTransport(t, func(t *testing.T, h *sandboxdtest.Host) {
		ctx := ctxT(t)
		// The child writes its pid to a file and keeps running after the
		// shell is killed unless the whole group goes.
		start := time.Now()
		res, err := h.Exec(ctx, conch.ExecRequest{
			Argv:    []string{"sh", "-c", "sleep 60 & echo $! > child.pid; echo started; wait"},
			Timeout: 1500 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Stopped != conch.StoppedTimeout {
			t.Errorf("stopped: got %q, want %q", res.Stopped, conch.StoppedTimeout)
		}
		if res.ExitCode != 128+9 {
			t.Errorf("exit code: got %d, want 137 (SIGKILL)", res.ExitCode)
		}
		if string(res.Output) != "started\n" {
			t.Errorf("output: got %q, want %q", res.Output, "started\n")
		}
		if el := time.Since(start); el > 10*time.Second {
			t.Errorf("Exec took %v after a 1.5s timeout", el)
		}
		b, err := os.ReadFile(h.WorkspacePath("child.pid"))
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		waitGone(t, pid)
	})
}

func TestExecCancel(t *testing.T) {
	forEachTransport(t, func(t *testing.T, h *sandboxdtest.Host) {
		ctx, cancel := context.WithCancel(ctxT(t))
		started := make(chan struct{})
		var once sync.Once
		go func() {
			<-started
			cancel()
		}()
		res, err := h.Exec(ctx, conch.ExecRequest{
			Argv:     []string{"sh", "-c", "sleep 60 & echo $! > cancel.pid; echo started; wait"},
			OnOutput: func([]byte) { once.Do(func() { close(started) }) },
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Stopped != conch.StoppedCanceled {
			t.Errorf("stopped: got %q, want %q", res.Stopped, conch.StoppedCanceled)
		}
		b, err := os.ReadFile(h.WorkspacePath("cancel.pid"))
		if err != nil {
			t.Fatal(err)
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		waitGone(t, pid)
		// The stream survives a cancel.
		if _, err := h.Exec(ctxT(t), conch.ExecRequest{Argv: []string{"true"}}); err != nil {
			t.Fatalf("Exec after cancel: %v", err)
		}
	})
}

// A 100 MiB output whose consumer is stuck must not stall another exec on
// the same stream, and must not pile up in memory.
func TestLargeOutputNoHeadOfLineBlocking(t *testing.T) {
	forEachTransport(t, func(t *testing.T, h *sandboxdtest.Host) {
		ctx := ctxT(t)
		const size = 100 << 20
		release := make(chan struct{})
		var seen int
		var peakHeap uint64
		bigDone := make(chan error, 1)
		firstChunk := make(chan struct{})
		go func() {
			res, err := h.Exec(ctx, conch.ExecRequest{
				Argv: []string{"head", "-c", strconv.Itoa(size), "/dev/zero"},
				OnOutput: func(b []byte) {
					if seen == 0 {
						close(firstChunk)
						<-release // stuck consumer
					}
					seen += len(b)
					if seen%(8<<20) < len(b) {
						var ms runtime.MemStats
						runtime.ReadMemStats(&ms)
						peakHeap = max(peakHeap, ms.HeapInuse)
					}
				},
			})
			if err == nil && (len(res.Output) != sandboxd.DefaultOutputLimit || !res.Truncated) {
				err = fmt.Errorf("big exec: kept %d bytes truncated=%v, want %d truncated", len(res.Output), res.Truncated, sandboxd.DefaultOutputLimit)
			}
			bigDone <- err
		}()
		<-firstChunk
		// The big stream is stuck; small requests still go through.
		for i := range 5 {
			res, err := h.Exec(ctx, conch.ExecRequest{Argv: []string{"echo", strconv.Itoa(i)}})
			if err != nil {
				t.Fatalf("small exec while a big one is stuck: %v", err)
			}
			if got, want := string(res.Output), fmt.Sprintf("%d\n", i); got != want {
				t.Errorf("got %q, want %q", got, want)
			}
		}
		if err := h.WriteFile(ctx, "small.txt", []byte("x"), 0); err != nil {
			t.Fatalf("write while a big exec is stuck: %v", err)
		}
		close(release)
		if err := <-bigDone; err != nil {
			t.Fatal(err)
		}
		if seen != size {
			t.Errorf("OnOutput saw %d bytes, want %d", seen, size)
		}
		if peakHeap > 64<<20 {
			t.Errorf("heap in use peaked at %d MiB while streaming 100 MiB, want < 64 MiB", peakHeap>>20)
		}
	})
}

func TestFiles(t *testing.T) {
	forEachTransport(t, func(t *testing.T, h *sandboxdtest.Host) {
		ctx := ctxT(t)
		if err := h.WriteFile(ctx, "/workspace/dir/a.txt", []byte("alpha\n"), 0o600); err != nil {
			t.Fatalf("WriteFile: %v", err)
		}
		if err := h.WriteFile(ctx, "dir/run.sh", []byte("#!/bin/sh\necho ran\n"), 0o755); err != nil {
			t.Fatalf("WriteFile relative: %v", err)
		}
		big := bytes.Repeat([]byte{0, 1, 2, 3, 255}, 1<<20) // 5 MiB binary
		if err := h.WriteFile(ctx, "/tmp/big.bin", big, 0); err != nil {
			t.Fatalf("WriteFile big: %v", err)
		}

		got, err := h.ReadFile(ctx, "dir/a.txt", 0)
		if err != nil || string(got) != "alpha\n" {
			t.Errorf("ReadFile: got %q, %v, want %q", got, err, "alpha\n")
		}
		got, err = h.ReadFile(ctx, "/workspace/dir/a.txt", 3)
		if err != nil || string(got) != "alp" {
			t.Errorf("ReadFile limit 3: got %q, %v, want %q", got, err, "alp")
		}
		got, err = h.ReadFile(ctx, "/tmp/big.bin", 0)
		if err != nil || !bytes.Equal(got, big) {
			t.Errorf("ReadFile big: got %d bytes, %v, want %d equal bytes", len(got), err, len(big))
		}
		if err := h.WriteFile(ctx, "empty", nil, 0); err != nil {
			t.Fatal(err)
		}
		if got, err := h.ReadFile(ctx, "empty", 0); err != nil || len(got) != 0 {
			t.Errorf("ReadFile empty: got %q, %v", got, err)
		}

		fi, err := os.Stat(h.WorkspacePath("dir/a.txt"))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("mode: got %v, %v, want 0600", fi.Mode(), err)
		}
		res, err := h.Exec(ctx, conch.ExecRequest{Argv: []string{"./run.sh"}, Dir: "/workspace/dir"})
		if err != nil || string(res.Output) != "ran\n" {
			t.Errorf("run written script: got %q, %v", res.Output, err)
		}

		// Replace atomically; no temp files left behind.
		if err := h.WriteFile(ctx, "dir/a.txt", []byte("beta\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		list, err := h.ListFiles(ctx, "dir")
		if err != nil {
			t.Fatalf("ListFiles: %v", err)
		}
		var names []string
		for _, e := range list {
			names = append(names, e.Name)
		}
		if got, want := strings.Join(names, ","), "a.txt,run.sh"; got != want {
			t.Errorf("ListFiles names: got %s, want %s", got, want)
		}
		if list[0].Size != 5 || list[0].IsDir || list[0].ModTime.IsZero() {
			t.Errorf("ListFiles entry: got %+v", list[0])
		}
		root, err := h.ListFiles(ctx, "/workspace")
		if err != nil || len(root) != 2 || !root[0].IsDir || root[0].Name != "dir" {
			t.Errorf("ListFiles /workspace: got %+v, %v", root, err)
		}

		errTests := []struct {
			name string
			fn   func() error
			is   error
			kind conch.ErrorKind
			text string
		}{
			{"read missing", func() error { _, err := h.ReadFile(ctx, "nope.txt", 0); return err }, fs.ErrNotExist, conch.KindNotFound, "/workspace/nope.txt does not exist"},
			{"read dir", func() error { _, err := h.ReadFile(ctx, "dir", 0); return err }, nil, conch.KindInvalid, "is a directory"},
			{"list missing", func() error { _, err := h.ListFiles(ctx, "/tmp/nope"); return err }, fs.ErrNotExist, conch.KindNotFound, "does not exist"},
			{"list a file", func() error { _, err := h.ListFiles(ctx, "dir/a.txt"); return err }, nil, conch.KindInvalid, "not a directory"},
			{"write over dir", func() error { return h.WriteFile(ctx, "dir", []byte("x"), 0) }, nil, conch.KindInvalid, "is a directory"},
			{"NUL path", func() error { _, err := h.ReadFile(ctx, "a\x00b", 0); return err }, nil, conch.KindInvalid, "NUL"},
		}
		for _, tt := range errTests {
			t.Run(tt.name, func(t *testing.T) {
				err := tt.fn()
				if err == nil {
					t.Fatal("got nil error")
				}
				if tt.is != nil && !errors.Is(err, tt.is) {
					t.Errorf("errors.Is(%v, %v) = false", err, tt.is)
				}
				if got := conch.KindOf(err); got != tt.kind {
					t.Errorf("kind: got %q, want %q (%v)", got, tt.kind, err)
				}
				if !strings.Contains(conch.UserMessage(err), tt.text) {
					t.Errorf("message: got %q, want it to contain %q", conch.UserMessage(err), tt.text)
				}
			})
		}
		des, _ := os.ReadDir(h.WorkspacePath("dir"))
		if len(des) != 2 {
			t.Errorf("workspace/dir holds %d entries, want 2 (a temp file left behind?)", len(des))
		}
	})
}

func TestReconnect(t *testing.T) {
	forEachTransport(t, func(t *testing.T, h *sandboxdtest.Host) {
		ctx := ctxT(t)
		v, err := h.Ping(ctx)
		if err != nil || v != sandboxd.Version {
			t.Fatalf("Ping: got %q, %v, want %q", v, err, sandboxd.Version)
		}
		// An exec in flight when the stream breaks fails clearly.
		started := make(chan struct{})
		var once sync.Once
		errc := make(chan error, 1)
		go func() {
			_, err := h.Exec(ctx, conch.ExecRequest{
				Argv:     []string{"sh", "-c", "echo up; sleep 2"},
				OnOutput: func([]byte) { once.Do(func() { close(started) }) },
			})
			errc <- err
		}()
		<-started
		h.Break()
		err = <-errc
		if !errors.Is(err, sandboxd.ErrDisconnected) {
			t.Fatalf("in-flight Exec: got %v, want ErrDisconnected", err)
		}
		if conch.KindOf(err) != conch.KindTransient {
			t.Errorf("kind: got %q, want transient", conch.KindOf(err))
		}
		// The next call dials a new stream.
		res, err := h.Exec(ctx, conch.ExecRequest{Argv: []string{"echo", "again"}})
		if err != nil || string(res.Output) != "again\n" {
			t.Fatalf("Exec after break: got %q, %v", res.Output, err)
		}
		if got := h.Dials(); got != 2 {
			t.Errorf("dials: got %d, want 2", got)
		}
		// Reads retry transparently on a stream that broke while idle.
		h.Break()
		if err := h.WriteFile(ctx, "f", []byte("ok"), 0); err != nil {
			t.Fatalf("WriteFile after idle break: %v", err)
		}
		if got, err := h.ReadFile(ctx, "f", 0); err != nil || string(got) != "ok" {
			t.Errorf("ReadFile after idle break: got %q, %v", got, err)
		}
	})
}

func TestHandshakeGarbage(t *testing.T) {
	tests := []struct {
		name, stream, want string
	}{
		{"runtime error text", "OCI runtime exec failed: exec: \"conch\": executable file not found\n", "OCI runtime exec failed"},
		{"empty", "", "ended before the hello"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := sandboxd.NewClient(func(context.Context) (io.ReadWriteCloser, error) {
				return nopWriteCloser{strings.NewReader(tt.stream)}, nil
			}, sandboxd.ClientOptions{})
			_, err := c.Ping(ctxT(t))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
			if conch.KindOf(err) != conch.KindUnavailable {
				t.Errorf("kind: got %q, want unavailable", conch.KindOf(err))
			}
		})
	}
}

func TestClosedClient(t *testing.T) {
	h := sandboxdtest.HostSandbox(t, t.TempDir())
	h.Close()
	if _, err := h.Exec(ctxT(t), conch.ExecRequest{Argv: []string{"true"}}); !errors.Is(err, sandboxd.ErrClosed) {
		t.Errorf("got %v, want ErrClosed", err)
	}
}

type nopWriteCloser struct{ io.Reader }

func (nopWriteCloser) Write(b []byte) (int, error) { return len(b), nil }
func (nopWriteCloser) Close() error                { return nil }

// pipeDial serves srv over a fresh os.Pipe pair per dial.
func pipeDial(t *testing.T, srv *sandboxd.Server) sandboxd.DialFunc {
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	return func(ctx context.Context) (io.ReadWriteCloser, error) {
		cr, sw, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		sr, cw, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		wg.Go(func() {
			defer sw.Close()
			defer sr.Close()
			_ = srv.Serve(context.Background(), sr, sw)
		})
		return rwc{cr, cw}, nil
	}
}

type rwc struct{ r, w *os.File }

func (p rwc) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p rwc) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p rwc) Close() error                { p.w.Close(); return p.r.Close() }

// A background child that keeps the output open does not hang the exec: it
// ends a short grace after the program, and the child is left running, as
// with any exec.
// TestExecBackgroundChildEndsWithTheCall: a program's background child
// holding the output pipe neither delays the result nor outlives the call
// (long-lived programs belong in terminals).
func TestExecBackgroundChildEndsWithTheCall(t *testing.T) {
	h := sandboxdtest.HostSandbox(t, t.TempDir())
	res, err := h.Exec(ctxT(t), conch.ExecRequest{Argv: []string{"sh", "-c", "sleep 30 & echo $! > bg.pid; echo done"}})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != "done\n" || res.ExitCode != 0 {
		t.Errorf("got %q exit %d, want %q exit 0", res.Output, res.ExitCode, "done\n")
	}
	if res.Duration > 10*time.Second {
		t.Errorf("took %s, want the result without waiting for the child", res.Duration)
	}
	b, err := os.ReadFile(h.WorkspacePath("bg.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	deadline := time.Now().Add(5 * time.Second)
	for !processGone(pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !processGone(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("background child %d still runs after the call; want it killed with the call", pid)
	}
}

func TestContract(t *testing.T) {
	forEachTransport(t, func(t *testing.T, h *sandboxdtest.Host) {
		sandboxdtest.Contract(t, h)
	})
}

// FileSystem reports the size and use of the file system holding a path:
// on a workspace that is a file system of its own (a tmpfs of 8 MiB here,
// a volume in a pod), its disk use.
func TestFileSystem(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root (to mount a small tmpfs)", "not running as root")
	}
	h := sandboxdtest.HostSandbox(t, t.TempDir())
	ws := h.WorkspacePath(".")
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", ws).CombinedOutput(); err != nil {
		testenv.Missing(t, "a small tmpfs", strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { exec.Command("umount", "-l", ws).Run() })
	ctx := t.Context()
	size, used, err := h.FileSystem(ctx, "/workspace")
	if err != nil || size != 8<<20 || used > 64<<10 {
		t.Fatalf("an empty 8 MiB workspace: size %d used %d, %v", size, used, err)
	}
	if err := h.WriteFile(ctx, "data.bin", bytes.Repeat([]byte{7}, 3<<20), 0); err != nil {
		t.Fatal(err)
	}
	if _, used, err = h.FileSystem(ctx, "data.bin"); err != nil || used < 3<<20 || used > 4<<20 {
		t.Fatalf("after 3 MiB written: used %d, %v", used, err)
	}
	if _, _, err := h.FileSystem(ctx, "/workspace/nope"); conch.KindOf(err) != conch.KindNotFound {
		t.Fatalf("a missing path: %v, want KindNotFound", err)
	}
}
