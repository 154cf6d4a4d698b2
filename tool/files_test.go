package tool

import (
	"os"
	"strings"
	"testing"
)

type pathArgs struct {
	Path       string  `json:"path,omitempty"`
	Content    *string `json:"content,omitempty"`
	Executable bool    `json:"executable,omitempty"`
}

func str(s string) *string { return &s }

func TestSandboxPath(t *testing.T) {
	tests := []struct {
		in, want, wantMsg string
	}{
		{"a.txt", "/workspace/a.txt", ""},
		{"./dir/../b", "/workspace/b", ""},
		{"/workspace", "/workspace", ""},
		{"/workspace/x/", "/workspace/x", ""},
		{"/tmp/x", "/tmp/x", ""},
		{"/etc/passwd", "", "refused: /etc/passwd is outside /workspace and /tmp"},
		{"../etc/passwd", "", "refused: /etc/passwd is outside"},
		{"/workspace/../etc", "", "refused: /etc is outside"},
		{"/workspacex/a", "", "refused: /workspacex/a is outside"},
		{"/tmpx", "", "outside"},
		{"", "", "the path is empty"},
		{"a\x00b", "", "NUL byte"},
		{strings.Repeat("a", 5000), "", "at most 4096"},
	}
	for _, tt := range tests {
		t.Run(tt.in[:min(len(tt.in), 30)], func(t *testing.T) {
			got, msg := sandboxPath(tt.in)
			if got != tt.want {
				t.Errorf("path: got %q, want %q", got, tt.want)
			}
			if (tt.wantMsg == "") != (msg == "") || !strings.Contains(msg, tt.wantMsg) {
				t.Errorf("message: got %q, want %q", msg, tt.wantMsg)
			}
		})
	}
}

func TestFileTools(t *testing.T) {
	env, h := hostEnv(t)
	log := &auditLog{}
	opts := FilesOptions{MaxRead: 64, MaxWrite: 1000, MaxEntries: 3, Auditor: log}
	read, write, list := NewReadFile(opts), NewWriteFile(opts), NewListFiles(opts)
	bash := NewBash(BashOptions{})

	steps := []struct {
		name      string
		run       func() (string, bool)
		wantErr   bool
		wantParts []string
	}{
		{"write relative", func() (string, bool) {
			o := runTool(t, write, env, pathArgs{Path: "notes/a.txt", Content: str("hello\n")})
			return o.Content, o.IsError
		}, false, []string{"wrote 6 bytes to /workspace/notes/a.txt"}},
		{"read it back", func() (string, bool) {
			o := runTool(t, read, env, pathArgs{Path: "/workspace/notes/a.txt"})
			return o.Content, o.IsError
		}, false, []string{"hello\n"}},
		{"write to /tmp", func() (string, bool) {
			o := runTool(t, write, env, pathArgs{Path: "/tmp/t.txt", Content: str("")})
			return o.Content, o.IsError
		}, false, []string{"wrote 0 bytes to /tmp/t.txt"}},
		{"read empty", func() (string, bool) {
			o := runTool(t, read, env, pathArgs{Path: "/tmp/t.txt"})
			return o.Content, o.IsError
		}, false, []string{"/tmp/t.txt is empty"}},
		{"write executable and run it", func() (string, bool) {
			o := runTool(t, write, env, pathArgs{Path: "run.sh", Content: str("#!/bin/sh\necho ran $1\n"), Executable: true})
			if o.IsError {
				return o.Content, o.IsError
			}
			o = runTool(t, bash, env, cmdArgs{Command: "./run.sh now"})
			return o.Content, o.IsError
		}, false, []string{"ran now"}},
		{"write outside", func() (string, bool) {
			o := runTool(t, write, env, pathArgs{Path: "/etc/x", Content: str("x")})
			return o.Content, o.IsError
		}, true, []string{"refused: /etc/x is outside /workspace and /tmp"}},
		{"write too large", func() (string, bool) {
			o := runTool(t, write, env, pathArgs{Path: "big", Content: str(strings.Repeat("x", 1001))})
			return o.Content, o.IsError
		}, true, []string{"1001 bytes; write_file takes at most 1000"}},
		{"write without content", func() (string, bool) {
			o := runTool(t, write, env, pathArgs{Path: "x"})
			return o.Content, o.IsError
		}, true, []string{`needs "content"`}},
		{"write over a directory", func() (string, bool) {
			o := runTool(t, write, env, pathArgs{Path: "notes", Content: str("x")})
			return o.Content, o.IsError
		}, true, []string{"/workspace/notes is a directory"}},
		{"read missing", func() (string, bool) {
			o := runTool(t, read, env, pathArgs{Path: "nope.txt"})
			return o.Content, o.IsError
		}, true, []string{"/workspace/nope.txt does not exist"}},
		{"read outside", func() (string, bool) {
			o := runTool(t, read, env, pathArgs{Path: "../../etc/passwd"})
			return o.Content, o.IsError
		}, true, []string{"outside /workspace and /tmp"}},
		{"read a directory", func() (string, bool) {
			o := runTool(t, read, env, pathArgs{Path: "notes"})
			return o.Content, o.IsError
		}, true, []string{"is a directory"}},
		{"read truncated", func() (string, bool) {
			os.WriteFile(h.WorkspacePath("long.txt"), []byte(strings.Repeat("é", 100)), 0o644)
			o := runTool(t, read, env, pathArgs{Path: "long.txt"})
			return o.Content, o.IsError
		}, false, []string{strings.Repeat("é", 32) + "\n[truncated: /workspace/long.txt is longer than 64 bytes"}},
		{"read binary", func() (string, bool) {
			os.WriteFile(h.WorkspacePath("bin"), []byte{0x7f, 'E', 'L', 'F', 0, 0, 1}, 0o644)
			o := runTool(t, read, env, pathArgs{Path: "bin"})
			return o.Content, o.IsError
		}, false, []string{"/workspace/bin is a binary file (7 bytes); not shown"}},
		{"list workspace", func() (string, bool) {
			o := runTool(t, list, env, struct{}{})
			return o.Content, o.IsError
		}, false, []string{"/workspace: 4 entries", "-rw-r--r--          7  ", "  bin\n", "drwx", "  notes/", "… and 1 more"}},
		{"list subdirectory", func() (string, bool) {
			o := runTool(t, list, env, pathArgs{Path: "notes"})
			return o.Content, o.IsError
		}, false, []string{"/workspace/notes: 1 entry", "6  ", "a.txt"}},
		{"list empty", func() (string, bool) {
			os.Mkdir(h.WorkspacePath("empty"), 0o755)
			o := runTool(t, list, env, pathArgs{Path: "empty"})
			return o.Content, o.IsError
		}, false, []string{"/workspace/empty is empty"}},
		{"list missing", func() (string, bool) {
			o := runTool(t, list, env, pathArgs{Path: "/tmp/nope"})
			return o.Content, o.IsError
		}, true, []string{"/tmp/nope does not exist"}},
		{"list outside", func() (string, bool) {
			o := runTool(t, list, env, pathArgs{Path: "/"})
			return o.Content, o.IsError
		}, true, []string{"refused: / is outside"}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			got, isErr := st.run()
			if isErr != st.wantErr {
				t.Errorf("IsError: got %v, want %v (%q)", isErr, st.wantErr, got)
			}
			for _, p := range st.wantParts {
				if !strings.Contains(got, p) {
					t.Errorf("content %q does not contain %q", got, p)
				}
			}
		})
	}
	b, err := os.ReadFile(h.WorkspacePath("notes/a.txt"))
	if err != nil || string(b) != "hello\n" {
		t.Errorf("file on disk: got %q, %v", b, err)
	}
	kinds := 0
	for _, ev := range log.events {
		if ev.Kind == "file_write" {
			kinds++
		}
	}
	if kinds != 4 { // a.txt, t.txt, run.sh, and the refused write over a directory
		t.Errorf("file_write audit events: got %d, want 4", kinds)
	}
}
