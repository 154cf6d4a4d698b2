package conch

import (
	"context"
	"fmt"
	"io"
)

// WorkspaceReader is a Sandbox that can read a file of its workspace
// safely, for files that leave the sandbox (send_file): the path is
// resolved inside the sandbox, under /workspace, without following any
// symbolic link (each component is opened with O_NOFOLLOW, so a link
// swapped in after any check is refused too); ".." is refused, and only a
// regular file is read (never a device, a FIFO or a socket).
type WorkspaceReader interface {
	// ReadWorkspaceFile returns the whole file. A file larger than limit
	// is not read: the error is a *FileTooLargeError with its size.
	ReadWorkspaceFile(ctx context.Context, path string, limit int64) ([]byte, error)
}

// FileTooLargeError says a file is over a size limit.
type FileTooLargeError struct {
	Path  string
	Size  int64
	Limit int64
}

func (e *FileTooLargeError) Error() string {
	return fmt.Sprintf("%s is %d bytes, over the limit of %d bytes", e.Path, e.Size, e.Limit)
}

// ConversationFiles opens a stored file of one conversation: a reference
// that belongs to another conversation is not found. The spool implements
// it; channels that serve files themselves (the web chat) use it.
type ConversationFiles interface {
	OpenFile(ctx context.Context, key ConversationKey, ref string) (io.ReadCloser, error)
}

// AuditFileSend records a file send_file sent out of a sandbox, or refused.
const AuditFileSend AuditKind = "file_send"
