package conch

import (
	"context"
	"io"
	"io/fs"
	"time"
)

// SandboxProvider hands out the computer of a conversation.
type SandboxProvider interface {
	// Sandbox returns the conversation's sandbox, creating or restarting it
	// on first use.
	Sandbox(ctx context.Context, key ConversationKey) (Sandbox, error)
}

// Runtime manages the sandboxes of all conversations.
type Runtime interface {
	SandboxProvider
	// Remove destroys the conversation's sandbox and its workspace.
	Remove(ctx context.Context, key ConversationKey) error
	// Reconcile runs at start: live sandboxes are reattached, stale ones
	// forgotten, labelled orphans unknown to the store removed.
	Reconcile(ctx context.Context) error
	Close() error
}

// Sandbox is one conversation's computer.
type Sandbox interface {
	// ID is the engine's container id.
	ID() string
	// Exec runs a program (never through a shell unless argv says so).
	Exec(ctx context.Context, req ExecRequest) (ExecResult, error)
	ReadFile(ctx context.Context, path string, limit int64) ([]byte, error)
	WriteFile(ctx context.Context, path string, data []byte, mode fs.FileMode) error
	ListFiles(ctx context.Context, path string) ([]FileInfo, error)
}

// ExecRequest describes one program run inside a sandbox.
type ExecRequest struct {
	Argv []string
	// Env adds KEY=value entries to the sandbox's environment.
	Env []string
	// Dir is the working directory; empty means /workspace.
	Dir string
	// Timeout kills the program when exceeded; 0 means no limit beyond ctx.
	Timeout time.Duration
	// OutputLimit caps the bytes kept in ExecResult.Output; 0 means a default.
	OutputLimit int
	// Stdin, if set, is copied to the program's standard input; the input is
	// closed when Stdin returns io.EOF.
	Stdin io.Reader
	// OnOutput, if set, receives output as it is produced (not capped).
	OnOutput func(chunk []byte)
}

// StoppedReason says why a program did not end on its own.
type StoppedReason string

// Stopped reasons.
const (
	StoppedNone     StoppedReason = ""
	StoppedTimeout  StoppedReason = "timeout"
	StoppedCanceled StoppedReason = "canceled"
	StoppedOOM      StoppedReason = "oom_killed"
	StoppedOutput   StoppedReason = "output_limit"
)

// ExecResult is how a program ended.
type ExecResult struct {
	ExitCode int
	// Output is stdout and stderr interleaved, capped at OutputLimit.
	Output    []byte
	Truncated bool
	Duration  time.Duration
	Stopped   StoppedReason
}

// FileInfo describes one entry of a sandbox directory.
type FileInfo struct {
	Name    string
	Size    int64
	Mode    fs.FileMode
	ModTime time.Time
	IsDir   bool
}
