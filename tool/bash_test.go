package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"conch"
	"conch/sandbox/sandboxd/sandboxdtest"
)

// auditLog records audit events; err, if set, is returned by Audit.
type auditLog struct {
	mu     sync.Mutex
	events []conch.AuditEvent
	err    error
}

var _ conch.AuditStore = (*auditLog)(nil)

func (a *auditLog) Audit(_ context.Context, ev conch.AuditEvent) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return a.err
	}
	a.events = append(a.events, ev)
	return nil
}

func (a *auditLog) last(t *testing.T) (conch.AuditEvent, map[string]any) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.events) == 0 {
		t.Fatal("no audit event recorded")
	}
	ev := a.events[len(a.events)-1]
	var d map[string]any
	if err := json.Unmarshal(ev.Detail, &d); err != nil {
		t.Fatalf("audit detail: %v", err)
	}
	return ev, d
}

var testKey = conch.ConversationKey{Channel: conch.ChannelCLI, ID: "t1"}

func hostEnv(t *testing.T) (conch.ToolEnv, *sandboxdtest.Host) {
	t.Helper()
	h := sandboxdtest.HostSandbox(t, t.TempDir())
	return conch.ToolEnv{Conversation: testKey, Sandboxes: sandboxdtest.Provider(h)}, h
}

func runTool(t *testing.T, tl conch.Tool, env conch.ToolEnv, args any) conch.ToolOutput {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out, err := tl.Run(ctx, env, raw)
	if err != nil {
		t.Fatalf("%s.Run(%s): Go error %v", tl.Spec().Name, raw, err)
	}
	return out
}

type cmdArgs struct {
	Command string  `json:"command"`
	Timeout float64 `json:"timeout_seconds,omitempty"`
	Workdir string  `json:"workdir,omitempty"`
}

func TestBashRuns(t *testing.T) {
	env, h := hostEnv(t)
	bash := NewBash(BashOptions{})
	if err := h.WriteFile(t.Context(), "sub/f.txt", []byte("in sub\n"), 0); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		args      cmdArgs
		wantErr   bool
		wantParts []string
	}{
		{"echo", cmdArgs{Command: "echo hello world"}, false, []string{"exit code 0 · ", "\n\nhello world\n"}},
		{"quotes", cmdArgs{Command: `printf '%s|' 'a b' "c \"d\"" e\ f`}, false, []string{`a b|c "d"|e f|`}},
		{"exit code", cmdArgs{Command: `sh -c 'echo failing; exit 3'`}, true, []string{"exit code 3", "failing"}},
		{"env prefix", cmdArgs{Command: `GREETING='hi there' sh -c 'echo "$GREETING"'`}, false, []string{"hi there"}},
		{"no output", cmdArgs{Command: "true"}, false, []string{"(no output)"}},
		{"workdir", cmdArgs{Command: "cat f.txt", Workdir: "sub"}, false, []string{"in sub"}},
		{"timeout", cmdArgs{Command: "sleep 30", Timeout: 1}, true, []string{"exit code 137", "killed: it ran longer than the 1s timeout"}},
		{"program not found", cmdArgs{Command: "no-such-tool --x"}, true, []string{`"no-such-tool" not found`}},
		{"file in workdir without ./", cmdArgs{Command: "f.txt", Workdir: "sub"}, true, []string{"write ./f.txt"}},
		{"missing workdir", cmdArgs{Command: "ls", Workdir: "nope"}, true, []string{"working directory /workspace/nope does not exist"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := runTool(t, bash, env, tt.args)
			if out.IsError != tt.wantErr {
				t.Errorf("IsError: got %v, want %v (%q)", out.IsError, tt.wantErr, out.Content)
			}
			for _, p := range tt.wantParts {
				if !strings.Contains(out.Content, p) {
					t.Errorf("content %q does not contain %q", out.Content, p)
				}
			}
		})
	}
}

func TestBashRefuses(t *testing.T) {
	env, _ := hostEnv(t)
	bash := NewBash(BashOptions{})
	tests := []struct {
		name      string
		command   string
		wantParts []string
	}{
		{"pipe", "ls | wc -l", []string{"a pipe (|)", "without a shell", "separate bash calls", "bash script.sh"}},
		{"and", "make && make test", []string{"&&", "without a shell"}},
		{"semicolon", "cd x; ls", []string{";", "without a shell"}},
		{"redirect", "echo x > f", []string{"redirect", "write_file"}},
		{"2>&1", "make 2>&1", []string{"already come back together: drop 2>&1"}},
		{"backticks", "echo `id`", []string{"backtick", "without a shell"}},
		{"substitution", "echo $(id)", []string{"$(...)", "without a shell"}},
		{"variable", "echo $HOME", []string{"$HOME", "no shell to expand variables"}},
		{"glob", "ls *.go", []string{"glob", "find . -name '*.go'"}},
		{"unterminated quote", `echo "abc`, []string{"unterminated double quote starting at offset 5", "Close the quote"}},
		{"NUL", "echo a\x00b", []string{"NUL byte at offset 6"}},
		{"empty", "  ", []string{"empty"}},
		{"cd", "cd /tmp", []string{"cd is a shell builtin", "workdir"}},
		{"export", "export FOO=1", []string{"export is a shell builtin", "NAME=value prefix"}},
		{"too long", "echo " + strings.Repeat("a", 1<<20), []string{"1048581 bytes long; at most 65536"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := runTool(t, bash, env, cmdArgs{Command: tt.command})
			if !out.IsError {
				t.Errorf("IsError: got false, want true (%q)", out.Content)
			}
			for _, p := range tt.wantParts {
				if !strings.Contains(out.Content, p) {
					t.Errorf("content %q does not contain %q", out.Content, p)
				}
			}
		})
	}
	t.Run("bad arguments", func(t *testing.T) {
		for _, raw := range []string{`{"command": 5}`, `not json`, `{"command":"ls","timeout_seconds":-1}`} {
			out, err := bash.Run(t.Context(), env, json.RawMessage(raw))
			if err != nil || !out.IsError {
				t.Errorf("Run(%s): got %+v, %v; want a tool failure", raw, out, err)
			}
		}
	})
	t.Run("workdir outside", func(t *testing.T) {
		out := runTool(t, bash, env, cmdArgs{Command: "ls", Workdir: "/etc"})
		if !out.IsError || !strings.Contains(out.Content, "outside /workspace and /tmp") {
			t.Errorf("got %+v, want a refusal naming /workspace and /tmp", out)
		}
	})
	t.Run("no runtime", func(t *testing.T) {
		out := runTool(t, bash, conch.ToolEnv{Conversation: testKey}, cmdArgs{Command: "ls"})
		if !out.IsError || !strings.Contains(out.Content, "no sandbox runtime") {
			t.Errorf("got %+v, want a failure saying there is no runtime", out)
		}
	})
}

func TestBashTruncation(t *testing.T) {
	env, _ := hostEnv(t)
	bash := NewBash(BashOptions{OutputLimit: 1000})
	out := runTool(t, bash, env, cmdArgs{Command: "seq 1 100000"})
	if out.IsError {
		t.Fatalf("IsError: %q", out.Content)
	}
	const total = 588895 // bytes of seq 1 100000
	for _, p := range []string{
		fmt.Sprintf("output truncated: %d bytes in all; showing the first 500 and the last 500", total),
		"\n\n1\n2\n3\n",
		fmt.Sprintf("[… %d bytes omitted …]", total-1000),
		"99999\n100000\n",
	} {
		if !strings.Contains(out.Content, p) {
			t.Errorf("content does not contain %q:\n%s", p, out.Content)
		}
	}
	if len(out.Content) > 1300 {
		t.Errorf("content is %d bytes, want about 1000 plus the status lines", len(out.Content))
	}
}

func TestBashAllowlist(t *testing.T) {
	env, _ := hostEnv(t)
	log := &auditLog{}
	bash := NewBash(BashOptions{Allow: []string{"echo", "/bin/true"}, Auditor: log})
	tests := []struct {
		command   string
		wantErr   bool
		wantParts []string
	}{
		{"echo ok", false, []string{"ok"}},
		{"/bin/true", false, []string{"exit code 0"}},
		{"true", true, []string{"true is not an allowed program here. Allowed programs: echo, /bin/true."}},
		{"/bin/echo hi", true, []string{"/bin/echo is not an allowed program"}},
		{"LD_PRELOAD=/x.so echo hi", true, []string{"may not set LD_PRELOAD"}},
		{"ls | wc", true, []string{"bash itself is not among the allowed programs"}},
	}
	for _, tt := range tests {
		t.Run(tt.command, func(t *testing.T) {
			out := runTool(t, bash, env, cmdArgs{Command: tt.command})
			if out.IsError != tt.wantErr {
				t.Errorf("IsError: got %v, want %v (%q)", out.IsError, tt.wantErr, out.Content)
			}
			for _, p := range tt.wantParts {
				if !strings.Contains(out.Content, p) {
					t.Errorf("content %q does not contain %q", out.Content, p)
				}
			}
		})
	}
	if !strings.Contains(bash.Spec().Description, "Allowed programs: echo, /bin/true.") {
		t.Errorf("spec does not list the allowed programs: %s", bash.Spec().Description)
	}
	kinds := map[conch.AuditKind]int{}
	for _, e := range log.events {
		kinds[e.Kind]++
	}
	if kinds["exec"] != 2 || kinds["exec_refused"] != 3 {
		t.Errorf("audit kinds: got %v, want 2 exec and 3 exec_refused", kinds)
	}
}

func TestBashAudit(t *testing.T) {
	env, h := hostEnv(t)
	log := &auditLog{}
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	bash := NewBash(BashOptions{Auditor: log, OutputLimit: 10, Now: func() time.Time { return at }})
	out := runTool(t, bash, env, cmdArgs{Command: "FOO=secret sh -c 'echo 0123456789abcdef; exit 2'"})
	if !out.IsError {
		t.Fatalf("IsError: got false for exit 2: %q", out.Content)
	}
	ev, d := log.last(t)
	if ev.Kind != "exec" || ev.Conversation != testKey || !ev.At.Equal(at) {
		t.Errorf("event: got kind %q, conversation %v, at %v", ev.Kind, ev.Conversation, ev.At)
	}
	want := map[string]any{
		"tool":           "bash",
		"container_id":   h.ID(),
		"argv":           []any{"sh", "-c", "echo 0123456789abcdef; exit 2"},
		"env":            []any{"FOO"},
		"dir":            "/workspace",
		"exit_code":      float64(2),
		"truncated":      true,
		"stopped_reason": "",
		"output_bytes":   float64(17),
	}
	for k, v := range want {
		if got := d[k]; fmt.Sprint(got) != fmt.Sprint(v) {
			t.Errorf("detail %s: got %v, want %v", k, got, v)
		}
	}
	if _, ok := d["duration_ms"]; !ok {
		t.Error("detail has no duration_ms")
	}
	if strings.Contains(string(ev.Detail), "secret") {
		t.Errorf("audit detail leaks an environment value: %s", ev.Detail)
	}

	// A program that is not there is audited with its error.
	runTool(t, bash, env, cmdArgs{Command: "no-such-tool"})
	_, d = log.last(t)
	if d["exit_code"] != float64(-1) || !strings.Contains(fmt.Sprint(d["error"]), "not found") {
		t.Errorf("not-found audit: got %v", d)
	}

	// A timeout is audited with its reason.
	runTool(t, bash, env, cmdArgs{Command: "sleep 10", Timeout: 1})
	_, d = log.last(t)
	if d["stopped_reason"] != "timeout" {
		t.Errorf("timeout audit: got stopped_reason %v", d["stopped_reason"])
	}

	// When the audit store fails, the turn ends.
	log.err = errors.New("disk full")
	_, err := bash.Run(t.Context(), env, json.RawMessage(`{"command":"true"}`))
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Run with a failing auditor: got %v, want the audit error", err)
	}
}

func TestBashCanceled(t *testing.T) {
	env, _ := hostEnv(t)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err := NewBash(BashOptions{}).Run(ctx, env, json.RawMessage(`{"command":"sleep 30"}`))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v, want the context's error", err)
	}
}

func TestBashSpec(t *testing.T) {
	for _, tl := range []conch.Tool{NewBash(BashOptions{}), NewReadFile(FilesOptions{}), NewWriteFile(FilesOptions{}), NewListFiles(FilesOptions{})} {
		spec := tl.Spec()
		var schema map[string]any
		if err := json.Unmarshal(spec.Parameters, &schema); err != nil {
			t.Errorf("%s: parameters are not JSON: %v", spec.Name, err)
		}
		if schema["type"] != "object" || spec.Description == "" {
			t.Errorf("%s: got schema type %v, description %q", spec.Name, schema["type"], spec.Description)
		}
	}
}

func TestTailBuffer(t *testing.T) {
	tb := &tailBuffer{max: 5}
	for _, s := range []string{"ab", "cdefg", "h", "ijklmnopq", "r"} {
		tb.write([]byte(s))
	}
	if got := string(tb.bytes()); got != "nopqr" {
		t.Errorf("tail: got %q, want %q", got, "nopqr")
	}
	if tb.total != 18 {
		t.Errorf("total: got %d, want 18", tb.total)
	}
}
