package docker_test

import (
	"bytes"
	"errors"
	"io/fs"
	"strings"
	"testing"
	"time"

	"conch"
	"conch/internal/testenv/engine"
	"conch/sandbox/docker"
)

// TestSandboxOps runs one contract over both ways of reaching a sandbox:
// the sandboxd and one Engine API exec per operation.
func TestSandboxOps(t *testing.T) {
	engine.Each(t, func(t *testing.T, eng *engine.Engine) {
		for _, mode := range []string{"agent", "engine-exec"} {
			t.Run(mode, func(t *testing.T) {
				rt := newRuntime(t, eng, func(o *docker.Options) {
					if mode == "agent" {
						withAgent(t)(o)
					}
				})
				ctx := ctxT(t)
				sb, err := rt.Sandbox(ctx, key("!ops:example.org"))
				if err != nil {
					t.Fatal(err)
				}
				t.Run("exit code and interleaved output", func(t *testing.T) {
					res := run(t, sb, "sh", "-c", "echo out; echo err >&2; exit 3")
					if res.ExitCode != 3 || string(res.Output) != "out\nerr\n" || res.Stopped != "" {
						t.Errorf("got exit %d output %q stopped %q, want 3 %q", res.ExitCode, res.Output, res.Stopped, "out\nerr\n")
					}
				})
				t.Run("argv is not a shell line", func(t *testing.T) {
					res := run(t, sb, "echo", "$HOME; rm -rf /workspace")
					if out(res) != "$HOME; rm -rf /workspace" {
						t.Errorf("got %q, want the argument verbatim", out(res))
					}
				})
				t.Run("env and dir", func(t *testing.T) {
					if err := sb.WriteFile(ctx, "sub/x", nil, 0o644); err != nil {
						t.Fatal(err)
					}
					res, err := sb.Exec(ctx, conch.ExecRequest{Argv: []string{"sh", "-c", "echo $FOO $(pwd)"}, Env: []string{"FOO=bar"}, Dir: "sub"})
					if err != nil || out(res) != "bar /workspace/sub" {
						t.Errorf("got %q, %v; want %q", out(res), err, "bar /workspace/sub")
					}
				})
				t.Run("stdin", func(t *testing.T) {
					res, err := sb.Exec(ctx, conch.ExecRequest{Argv: []string{"wc", "-c"}, Stdin: strings.NewReader(strings.Repeat("x", 100000))})
					if err != nil || out(res) != "100000" {
						t.Errorf("got %q, %v; want 100000", out(res), err)
					}
				})
				t.Run("timeout kills the process group", func(t *testing.T) {
					start := time.Now()
					res, err := sb.Exec(ctx, conch.ExecRequest{Argv: []string{"sh", "-c", "sleep 300 & sleep 300"}, Timeout: 500 * time.Millisecond})
					if err != nil {
						t.Fatal(err)
					}
					if res.Stopped != conch.StoppedTimeout || time.Since(start) > 30*time.Second {
						t.Errorf("got stopped %q after %s, want timeout soon", res.Stopped, time.Since(start))
					}
					if r := run(t, sb, "sh", "-c", "ps -eo comm | grep -c '^sleep$' || true"); out(r) != "1" {
						t.Errorf("sleeps left: got %q, want 1 (only the container's own)", out(r))
					}
				})
				t.Run("output limit", func(t *testing.T) {
					var seen int
					res, err := sb.Exec(ctx, conch.ExecRequest{Argv: []string{"head", "-c", "100000", "/dev/zero"}, OutputLimit: 1000,
						OnOutput: func(b []byte) { seen += len(b) }})
					if err != nil {
						t.Fatal(err)
					}
					if len(res.Output) != 1000 || !res.Truncated || seen != 100000 {
						t.Errorf("got %d bytes truncated=%v streamed %d, want 1000 true 100000", len(res.Output), res.Truncated, seen)
					}
				})
				t.Run("missing program", func(t *testing.T) {
					res, err := sb.Exec(ctx, conch.ExecRequest{Argv: []string{"no-such-program"}})
					if err == nil && res.ExitCode == 0 {
						t.Errorf("got success, want a failure the model can read")
					}
				})
				t.Run("files", func(t *testing.T) {
					data := bytes.Repeat([]byte("conch\n"), 10000)
					if err := sb.WriteFile(ctx, "/workspace/d/e/f.txt", data, 0o600); err != nil {
						t.Fatal(err)
					}
					got, err := sb.ReadFile(ctx, "d/e/f.txt", 0)
					if err != nil || !bytes.Equal(got, data) {
						t.Errorf("read back: got %d bytes, %v; want %d", len(got), err, len(data))
					}
					got, err = sb.ReadFile(ctx, "d/e/f.txt", 10)
					if err != nil || string(got) != "conch\nconc" {
						t.Errorf("limited read: got %q, %v", got, err)
					}
					list, err := sb.ListFiles(ctx, "d/e")
					if err != nil || len(list) != 1 || list[0].Name != "f.txt" || list[0].Size != int64(len(data)) || list[0].Mode.Perm() != 0o600 || list[0].IsDir {
						t.Errorf("list: got %+v, %v", list, err)
					}
					if _, err := sb.ReadFile(ctx, "nope.txt", 0); !errors.Is(err, fs.ErrNotExist) {
						t.Errorf("missing file: got %v, want fs.ErrNotExist", err)
					}
					if _, err := sb.ListFiles(ctx, "nope"); conch.KindOf(err) != conch.KindNotFound {
						t.Errorf("missing dir: got %v (kind %s), want not found", err, conch.KindOf(err))
					}
					if err := sb.WriteFile(ctx, "/etc/passwd", []byte("x"), 0o644); err == nil {
						t.Errorf("write to the read-only root: got no error")
					}
				})
			})
		}
	})
}
