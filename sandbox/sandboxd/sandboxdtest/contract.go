package sandboxdtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	"conch"
)

// Contract runs the behaviour every conch.Sandbox must have against sb:
// the host agent here, a real container in sandbox/docker. It needs sh,
// cat, echo, head and sleep in the sandbox, and a writable /workspace and
// /tmp; it works under /workspace/contract and /tmp.
func Contract(t *testing.T, sb conch.Sandbox) {
	t.Helper()
	ctxT := func(t *testing.T) context.Context {
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	exec := func(t *testing.T, req conch.ExecRequest) conch.ExecResult {
		t.Helper()
		res, err := sb.Exec(ctxT(t), req)
		if err != nil {
			t.Fatalf("Exec(%q): %v", req.Argv, err)
		}
		return res
	}

	t.Run("exec round trip", func(t *testing.T) {
		res := exec(t, conch.ExecRequest{Argv: []string{"echo", "hello", "a b"}})
		if got := string(res.Output); got != "hello a b\n" || res.ExitCode != 0 || res.Truncated || res.Stopped != "" {
			t.Errorf("got %q exit %d truncated %v stopped %q, want %q exit 0", got, res.ExitCode, res.Truncated, res.Stopped, "hello a b\n")
		}
	})
	t.Run("exit code and interleaved stderr", func(t *testing.T) {
		res := exec(t, conch.ExecRequest{Argv: []string{"sh", "-c", "echo 1; echo 2 >&2; echo 3; exit 7"}})
		if got := string(res.Output); got != "1\n2\n3\n" || res.ExitCode != 7 {
			t.Errorf("got %q exit %d, want %q exit 7", got, res.ExitCode, "1\n2\n3\n")
		}
	})
	t.Run("env", func(t *testing.T) {
		res := exec(t, conch.ExecRequest{Argv: []string{"sh", "-c", `printf %s "$X"`}, Env: []string{"X=a b$c"}})
		if got := string(res.Output); got != "a b$c" {
			t.Errorf("got %q, want %q", got, "a b$c")
		}
	})
	t.Run("stdin", func(t *testing.T) {
		in := strings.Repeat("line\n", 50000)
		res := exec(t, conch.ExecRequest{Argv: []string{"cat"}, Stdin: strings.NewReader(in), OutputLimit: len(in)})
		if string(res.Output) != in {
			t.Errorf("cat returned %d bytes, want the %d sent", len(res.Output), len(in))
		}
	})
	t.Run("output limit", func(t *testing.T) {
		var seen int
		res := exec(t, conch.ExecRequest{Argv: []string{"head", "-c", "100000", "/dev/zero"}, OutputLimit: 1000,
			OnOutput: func(b []byte) { seen += len(b) }})
		if len(res.Output) != 1000 || !res.Truncated || seen != 100000 || res.Stopped != "" {
			t.Errorf("got %d bytes truncated %v, OnOutput %d, stopped %q; want 1000 truncated, 100000, not stopped", len(res.Output), res.Truncated, seen, res.Stopped)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		res := exec(t, conch.ExecRequest{Argv: []string{"sleep", "30"}, Timeout: 500 * time.Millisecond})
		if res.Stopped != conch.StoppedTimeout || res.ExitCode != 137 {
			t.Errorf("got stopped %q exit %d, want %q exit 137", res.Stopped, res.ExitCode, conch.StoppedTimeout)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctxT(t))
		var once sync.Once
		res, err := sb.Exec(ctx, conch.ExecRequest{Argv: []string{"sh", "-c", "echo up; sleep 30"},
			OnOutput: func([]byte) { once.Do(cancel) }})
		if err != nil || res.Stopped != conch.StoppedCanceled {
			t.Errorf("got stopped %q, %v; want %q", res.Stopped, err, conch.StoppedCanceled)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				res, err := sb.Exec(ctxT(t), conch.ExecRequest{Argv: []string{"echo", fmt.Sprint(i)}})
				if err != nil || string(res.Output) != fmt.Sprintf("%d\n", i) {
					t.Errorf("exec %d: got %q, %v", i, res.Output, err)
				}
			})
		}
		wg.Wait()
	})
	t.Run("bad exec", func(t *testing.T) {
		tests := []struct {
			argv []string
			kind conch.ErrorKind
		}{
			{[]string{"no-such-program-contract"}, conch.KindNotFound},
			{[]string{"echo", "a\x00b"}, conch.KindInvalid},
			{nil, conch.KindInvalid},
		}
		for _, tt := range tests {
			_, err := sb.Exec(ctxT(t), conch.ExecRequest{Argv: tt.argv})
			if conch.KindOf(err) != tt.kind {
				t.Errorf("Exec(%q): got %v (kind %q), want kind %q", tt.argv, err, conch.KindOf(err), tt.kind)
			}
		}
	})
	t.Run("files", func(t *testing.T) {
		ctx := ctxT(t)
		data := []byte("contract\x00data\n")
		if err := sb.WriteFile(ctx, "/workspace/contract/a.txt", data, 0o600); err != nil {
			t.Fatalf("WriteFile: %v", err)
		}
		got, err := sb.ReadFile(ctx, "/workspace/contract/a.txt", 0)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("ReadFile: got %q, %v, want %q", got, err, data)
		}
		if got, err := sb.ReadFile(ctx, "/workspace/contract/a.txt", 4); err != nil || string(got) != "cont" {
			t.Errorf("ReadFile limit 4: got %q, %v", got, err)
		}
		res := exec(t, conch.ExecRequest{Argv: []string{"cat", "contract/a.txt"}})
		if !bytes.Equal(res.Output, data) {
			t.Errorf("cat of a written file from /workspace: got %q, want %q", res.Output, data)
		}
		list, err := sb.ListFiles(ctx, "/workspace/contract")
		if err != nil || len(list) != 1 || list[0].Name != "a.txt" || list[0].Size != int64(len(data)) || list[0].Mode.Perm() != 0o600 || list[0].IsDir {
			t.Errorf("ListFiles: got %+v, %v", list, err)
		}
		if err := sb.WriteFile(ctx, "/tmp/contract.txt", []byte("t"), 0); err != nil {
			t.Errorf("WriteFile /tmp: %v", err)
		}
		if _, err := sb.ReadFile(ctx, "/workspace/contract/missing", 0); !errors.Is(err, fs.ErrNotExist) || conch.KindOf(err) != conch.KindNotFound {
			t.Errorf("ReadFile missing: got %v, want fs.ErrNotExist of kind not_found", err)
		}
		if _, err := sb.ListFiles(ctx, "/workspace/contract/missing"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("ListFiles missing: got %v, want fs.ErrNotExist", err)
		}
	})
}
