package sandboxd

import (
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"syscall"

	"conch"
)

// Operations a request may name.
const (
	opPing  = "ping"
	opExec  = "exec"
	opRead  = "read"
	opWrite = "write"
	opList  = "list"
	// opReadWorkspace reads a regular file under the workspace without
	// following symbolic links (workspace_linux.go).
	opReadWorkspace = "read_workspace"
	// opStatfs reports the size and use of the file system holding a
	// path (a workspace on a volume of its own: its disk use).
	opStatfs = "statfs"
)

// hello is the first frame the server sends.
type hello struct {
	Proto   int    `json:"proto"`
	Version string `json:"version"`
}

// request is the JSON header of a request frame.
type request struct {
	Op string `json:"op"`

	// exec
	Argv      []string `json:"argv,omitempty"`
	Env       []string `json:"env,omitempty"`
	Dir       string   `json:"dir,omitempty"`
	TimeoutMS int64    `json:"timeout_ms,omitempty"`
	// Ceiling is the output size at which the program is killed (StoppedOutput).
	Ceiling int64 `json:"ceiling,omitempty"`
	// Stdin says data frames and an eof follow; without it stdin is /dev/null.
	Stdin bool `json:"stdin,omitempty"`

	// read, write, list
	Path  string `json:"path,omitempty"`
	Limit int64  `json:"limit,omitempty"`
	Mode  uint32 `json:"mode,omitempty"`
}

// result is the JSON payload of a result frame.
type result struct {
	Error *wireError `json:"error,omitempty"`

	// exec
	ExitCode    int    `json:"exit_code,omitempty"`
	Signal      int    `json:"signal,omitempty"`
	Stopped     string `json:"stopped,omitempty"`
	OOM         bool   `json:"oom,omitempty"`
	DurationUS  int64  `json:"duration_us,omitempty"`
	OutputBytes int64  `json:"output_bytes,omitempty"`

	// read: the file's size; write: bytes written
	Size int64 `json:"size,omitempty"`

	// ping
	Version string `json:"version,omitempty"`

	// statfs: the file system's size and what is used of it, in bytes
	FSBytes int64 `json:"fs_bytes,omitempty"`
	FSUsed  int64 `json:"fs_used,omitempty"`
}

// wireEntry is one directory entry of a listing (sent as JSON data).
type wireEntry struct {
	Name    string `json:"name"`
	Size    int64  `json:"size"`
	Mode    uint32 `json:"mode"`
	ModTime int64  `json:"mtime_ns"`
	IsDir   bool   `json:"dir,omitempty"`
}

// Error codes carried by a result's error.
const (
	codeNotFound   = "not_found"
	codePermission = "permission"
	codeInvalid    = "invalid"
	codeExists     = "exists"
	codeInternal   = "internal"
	// codeTooLarge: a file over the request's limit (Size says how large).
	codeTooLarge = "too_large"
)

type wireError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Size is the file's size with codeTooLarge.
	Size int64 `json:"size,omitempty"`
}

// newWireError classifies err for the wire.
func newWireError(err error) *wireError {
	code := codeInternal
	var we *wireError
	switch {
	case errors.As(err, &we):
		return we
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, exec.ErrNotFound):
		code = codeNotFound
	case errors.Is(err, fs.ErrPermission):
		code = codePermission
	case errors.Is(err, fs.ErrExist):
		code = codeExists
	case errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENOTDIR),
		errors.Is(err, syscall.ENAMETOOLONG), errors.Is(err, syscall.EINVAL):
		code = codeInvalid
	}
	return &wireError{Code: code, Message: err.Error()}
}

func (e *wireError) Error() string { return e.Message }

func invalidf(format string, args ...any) *wireError {
	return &wireError{Code: codeInvalid, Message: fmt.Sprintf(format, args...)}
}

// RemoteError is a failure reported by the agent: the operation reached the
// sandbox and was refused or failed there (a missing file, a program not
// found, a bad argument). It matches fs.ErrNotExist, fs.ErrPermission and
// fs.ErrExist with errors.Is, and unwraps to a *conch.Error whose kind is
// KindNotFound or KindInvalid and whose user text is Msg.
type RemoteError struct {
	Op   string
	Code string
	Msg  string
}

func (e *RemoteError) Error() string { return e.Op + ": " + e.Msg }

// Unwrap exposes the conch kind and user-safe text.
func (e *RemoteError) Unwrap() error { return &conch.Error{Kind: e.kind(), User: e.Msg} }

// Is lets errors.Is match the fs sentinels.
func (e *RemoteError) Is(target error) bool {
	switch target {
	case fs.ErrNotExist:
		return e.Code == codeNotFound
	case fs.ErrPermission:
		return e.Code == codePermission
	case fs.ErrExist:
		return e.Code == codeExists
	}
	return false
}

// kind maps the code to a conch error kind.
func (e *RemoteError) kind() conch.ErrorKind {
	switch e.Code {
	case codeNotFound:
		return conch.KindNotFound
	case codePermission, codeInvalid, codeExists, codeTooLarge:
		return conch.KindInvalid
	}
	return conch.KindInternal
}

func remoteErr(op string, we *wireError) error {
	return &RemoteError{Op: op, Code: we.Code, Msg: we.Message}
}
