package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"conch"
)

// Sandbox directories the tools may touch.
const (
	workspaceDir = "/workspace"
	tmpDir       = "/tmp"
	maxPathLen   = 4096
)

// Defaults of the file tools.
const (
	DefaultMaxRead    = 100 << 10
	DefaultMaxWrite   = 1 << 20
	DefaultMaxEntries = 500
)

// FilesOptions configures read_file, write_file and list_files.
type FilesOptions struct {
	// MaxRead is how many bytes read_file returns at most; 0 means DefaultMaxRead.
	MaxRead int
	// MaxWrite is the largest content write_file accepts; 0 means DefaultMaxWrite.
	MaxWrite int
	// MaxEntries is how many entries list_files shows; 0 means DefaultMaxEntries.
	MaxEntries int
	// Auditor, if set, records every write (kind "file_write").
	Auditor conch.AuditStore
	// Now is the clock of audit events; nil means time.Now.
	Now func() time.Time
}

func (o FilesOptions) withDefaults() FilesOptions {
	if o.MaxRead <= 0 {
		o.MaxRead = DefaultMaxRead
	}
	if o.MaxWrite <= 0 {
		o.MaxWrite = DefaultMaxWrite
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// ReadFile is the tool read_file.
type ReadFile struct{ opts FilesOptions }

// WriteFile is the tool write_file.
type WriteFile struct{ opts FilesOptions }

// ListFiles is the tool list_files.
type ListFiles struct{ opts FilesOptions }

var (
	_ conch.Tool = (*ReadFile)(nil)
	_ conch.Tool = (*WriteFile)(nil)
	_ conch.Tool = (*ListFiles)(nil)
)

// NewReadFile returns the read_file tool.
func NewReadFile(opts FilesOptions) *ReadFile { return &ReadFile{opts.withDefaults()} }

// NewWriteFile returns the write_file tool.
func NewWriteFile(opts FilesOptions) *WriteFile { return &WriteFile{opts.withDefaults()} }

// NewListFiles returns the list_files tool.
func NewListFiles(opts FilesOptions) *ListFiles { return &ListFiles{opts.withDefaults()} }

// sandboxPath validates a path the model gave: relative paths are under
// /workspace; the result is clean and inside /workspace or /tmp. The
// returned message, when not empty, is for the model.
func sandboxPath(p string) (string, string) {
	switch {
	case p == "":
		return "", "the path is empty"
	case strings.IndexByte(p, 0) >= 0:
		return "", "the path contains a NUL byte"
	case len(p) > maxPathLen:
		return "", fmt.Sprintf("the path is %d bytes long; at most %d", len(p), maxPathLen)
	}
	if !path.IsAbs(p) {
		p = path.Join(workspaceDir, p)
	}
	p = path.Clean(p)
	for _, root := range []string{workspaceDir, tmpDir} {
		if p == root || strings.HasPrefix(p, root+"/") {
			return p, ""
		}
	}
	return "", fmt.Sprintf("refused: %s is outside /workspace and /tmp. Files can only be read and written there; relative paths are under /workspace", p)
}

// sandboxFailure turns an error from the sandbox into what the model reads,
// or returns it as a Go error when the machinery broke.
func sandboxFailure(op string, err error) (conch.ToolOutput, error) {
	switch conch.KindOf(err) {
	case conch.KindNotFound, conch.KindInvalid:
		return conch.ToolFail(conch.UserMessage(err)), nil
	}
	return conch.ToolOutput{}, fmt.Errorf("%s: %w", op, err)
}

// sandbox returns the conversation's sandbox; a missing runtime is a result
// the model reads, anything else a Go error.
func sandbox(ctx context.Context, env conch.ToolEnv, op string) (conch.Sandbox, *conch.ToolOutput, error) {
	if env.Sandboxes == nil {
		out := conch.ToolFail("there is no computer in this conversation: no sandbox runtime is configured")
		return nil, &out, nil
	}
	sb, err := env.Sandbox(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: sandbox: %w", op, err)
	}
	return sb, nil, nil
}

// Spec implements conch.Tool.
func (t *ReadFile) Spec() conch.ToolSpec {
	return conch.ToolSpec{
		Name: "read_file",
		Description: fmt.Sprintf("Read a text file in your computer. Relative paths are under /workspace; only "+
			"/workspace and /tmp are allowed. Returns at most %d bytes; for a part of a longer file use bash, "+
			"e.g. `sed -n '200,300p' file`.", t.opts.MaxRead),
		Parameters: schemaFor[readFileArgs](),
	}
}

type readFileArgs struct {
	Path string `json:"path" jsonschema:"file path, relative to /workspace or absolute under /workspace or /tmp"`
}

// Run implements conch.Tool.
func (t *ReadFile) Run(ctx context.Context, env conch.ToolEnv, raw json.RawMessage) (conch.ToolOutput, error) {
	var args readFileArgs
	if err := json.Unmarshal(raw, &args); err != nil {
		return conch.ToolFail(`read_file needs {"path": string}: ` + err.Error()), nil
	}
	p, msg := sandboxPath(args.Path)
	if msg != "" {
		return conch.ToolFail(msg), nil
	}
	sb, out, err := sandbox(ctx, env, "read_file")
	if out != nil || err != nil {
		return deref(out), err
	}
	data, err := sb.ReadFile(ctx, p, int64(t.opts.MaxRead)+1)
	if err != nil {
		return sandboxFailure("read_file", err)
	}
	truncated := len(data) > t.opts.MaxRead
	if truncated {
		data = data[:t.opts.MaxRead]
	}
	if isBinary(data, truncated) {
		return conch.ToolOK(fmt.Sprintf("%s is a binary file (%s); not shown. Inspect it with bash, e.g. `file %s` or `od -c %s`.",
			p, sizeText(len(data), truncated), p, p)), nil
	}
	text := string(data)
	if truncated {
		text = cutValid(text, len(text))
		text += fmt.Sprintf("\n[truncated: %s is longer than %d bytes; read further parts with bash, e.g. `sed -n '200,400p' %s`]", p, t.opts.MaxRead, p)
	}
	if text == "" {
		return conch.ToolOK(fmt.Sprintf("(%s is empty)", p)), nil
	}
	return conch.ToolOK(text), nil
}

func sizeText(n int, more bool) string {
	if more {
		return fmt.Sprintf("more than %d bytes", n)
	}
	return fmt.Sprintf("%d bytes", n)
}

// isBinary reports whether data does not look like text. A cut at the end
// may split a UTF-8 sequence, which does not count.
func isBinary(data []byte, cut bool) bool {
	if cut {
		data = []byte(cutValid(string(data), len(data)))
	}
	return strings.IndexByte(string(data), 0) >= 0 || !utf8.Valid(data)
}

// cutValid returns s[:n], shortened so it does not end inside a UTF-8 sequence.
func cutValid(s string, n int) string {
	s = s[:n]
	for i := 0; i < utf8.UTFMax && len(s) > 0; i++ {
		r, size := utf8.DecodeLastRuneInString(s)
		if r != utf8.RuneError || size != 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s
}

func deref(o *conch.ToolOutput) conch.ToolOutput {
	if o == nil {
		return conch.ToolOutput{}
	}
	return *o
}

// Spec implements conch.Tool.
func (t *WriteFile) Spec() conch.ToolSpec {
	return conch.ToolSpec{
		Name: "write_file",
		Description: fmt.Sprintf("Create or replace a file in your computer with the given content (at most %d bytes). "+
			"Relative paths are under /workspace; only /workspace and /tmp are allowed. Missing directories are created. "+
			"The file is replaced atomically. Set executable to run it as a program afterwards.", t.opts.MaxWrite),
		Parameters: schemaFor[writeFileArgs](),
	}
}

type writeFileArgs struct {
	Path       string  `json:"path" jsonschema:"file path, relative to /workspace or absolute under /workspace or /tmp"`
	Content    *string `json:"content" jsonschema:"the complete new content of the file" schema:"type=string"`
	Executable bool    `json:"executable,omitempty" jsonschema:"make the file executable (mode 0755 instead of 0644)"`
}

// Run implements conch.Tool.
func (t *WriteFile) Run(ctx context.Context, env conch.ToolEnv, raw json.RawMessage) (conch.ToolOutput, error) {
	var args writeFileArgs
	if err := json.Unmarshal(raw, &args); err != nil {
		return conch.ToolFail(`write_file needs {"path": string, "content": string}: ` + err.Error()), nil
	}
	if args.Content == nil {
		return conch.ToolFail(`write_file needs "content" (use "" for an empty file)`), nil
	}
	p, msg := sandboxPath(args.Path)
	if msg != "" {
		return conch.ToolFail(msg), nil
	}
	if p == workspaceDir || p == tmpDir {
		return conch.ToolFail(fmt.Sprintf("%s is a directory; give a file name inside it", p)), nil
	}
	if n := len(*args.Content); n > t.opts.MaxWrite {
		return conch.ToolFail(fmt.Sprintf("the content is %d bytes; write_file takes at most %d. Write the file in parts (e.g. several files joined by a script) or generate it with a program.", n, t.opts.MaxWrite)), nil
	}
	sb, out, err := sandbox(ctx, env, "write_file")
	if out != nil || err != nil {
		return deref(out), err
	}
	mode := fs.FileMode(0o644)
	if args.Executable {
		mode = 0o755
	}
	start := t.opts.Now()
	werr := sb.WriteFile(ctx, p, []byte(*args.Content), mode)
	if t.opts.Auditor != nil {
		detail := map[string]any{
			"tool":         "write_file",
			"container_id": sb.ID(),
			"path":         p,
			"bytes":        len(*args.Content),
			"mode":         fmt.Sprintf("%04o", mode),
			"duration_ms":  t.opts.Now().Sub(start).Milliseconds(),
		}
		if werr != nil {
			detail["error"] = werr.Error()
		}
		if err := conch.RecordAudit(ctx, t.opts.Auditor, t.opts.Now(), conch.AuditFileWrite, env.Conversation, detail); err != nil {
			return conch.ToolOutput{}, fmt.Errorf("write_file: %w", err)
		}
	}
	if werr != nil {
		return sandboxFailure("write_file", werr)
	}
	return conch.ToolOK(fmt.Sprintf("wrote %d bytes to %s", len(*args.Content), p)), nil
}

// Spec implements conch.Tool.
func (t *ListFiles) Spec() conch.ToolSpec {
	return conch.ToolSpec{
		Name: "list_files",
		Description: "List a directory in your computer: type and permissions, size in bytes, modification time (UTC) " +
			"and name (directories end in /). Without a path it lists /workspace; only /workspace and /tmp are allowed.",
		Parameters: schemaFor[listFilesArgs](),
	}
}

type listFilesArgs struct {
	Path string `json:"path,omitempty" jsonschema:"directory, relative to /workspace or absolute under /workspace or /tmp; default /workspace"`
}

// Run implements conch.Tool.
func (t *ListFiles) Run(ctx context.Context, env conch.ToolEnv, raw json.RawMessage) (conch.ToolOutput, error) {
	var args listFilesArgs
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &args); err != nil {
			return conch.ToolFail(`list_files takes {"path": string}: ` + err.Error()), nil
		}
	}
	if args.Path == "" {
		args.Path = workspaceDir
	}
	p, msg := sandboxPath(args.Path)
	if msg != "" {
		return conch.ToolFail(msg), nil
	}
	sb, out, err := sandbox(ctx, env, "list_files")
	if out != nil || err != nil {
		return deref(out), err
	}
	entries, err := sb.ListFiles(ctx, p)
	if err != nil {
		return sandboxFailure("list_files", err)
	}
	if len(entries) == 0 {
		return conch.ToolOK(p + " is empty"), nil
	}
	var b strings.Builder
	if len(entries) == 1 {
		fmt.Fprintf(&b, "%s: 1 entry\n", p)
	} else {
		fmt.Fprintf(&b, "%s: %d entries\n", p, len(entries))
	}
	for i, e := range entries {
		if i == t.opts.MaxEntries {
			fmt.Fprintf(&b, "… and %d more (list a subdirectory, or use bash `find` with a -name filter)\n", len(entries)-i)
			break
		}
		name, size := e.Name, fmt.Sprint(e.Size)
		if e.IsDir {
			name, size = name+"/", "-"
		}
		fmt.Fprintf(&b, "%s %10s  %s  %s\n", e.Mode.String(), size, e.ModTime.UTC().Format("2006-01-02 15:04"), name)
	}
	return conch.ToolOK(strings.TrimSuffix(b.String(), "\n")), nil
}
