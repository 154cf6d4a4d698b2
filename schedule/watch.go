package schedule

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"

	"conch"
	"conch/internal/backoff"
)

// Bounds of the file watch's stat interval.
const (
	fileCheckFirst = time.Second
	fileCheckMax   = 30 * time.Second
)

// SandboxWaiter waits for watches in conversations' sandboxes: terminal
// conditions on the terminal Manager's pushed output and exit markers, file
// conditions by a stat through the in-sandbox agent at an interval that
// backs off from 1 s to 30 s.
//
// Why not inotify: the sandbox image need not have inotify-tools, and an
// inotifywait would be one more long-lived process per watch inside a
// container capped at 128 pids; a stat over the agent's already-open stream
// costs well under a millisecond, so even the first, fastest checks are
// negligible, and the backoff keeps an idle watch at two checks a minute.
// The file's state is kept with the watch, so a change while conch was not
// running is noticed at the next start.
type SandboxWaiter struct {
	// Terminals waits on terminals (terminal.Pool); nil refuses terminal
	// watches.
	Terminals Terminals
	Sandboxes conch.SandboxProvider
}

// Terminals waits for a condition of a conversation's terminal and says
// what happened in a sentence the conversation is told. *terminal.Pool
// implements it (waiting again on a Manager that replaced a lost one).
type Terminals interface {
	// WaitExit waits for the command in terminal n to end (or the
	// terminal to close); recovered says the watch was set before a
	// restart, so an exit seen only as a finished command counts.
	WaitExit(ctx context.Context, key conch.ConversationKey, n int, recovered bool) (string, error)
	// WaitMatch waits for terminal n to print a line matching re.
	WaitMatch(ctx context.Context, key conch.ConversationKey, n int, re *regexp.Regexp) (string, error)
}

var _ Waiter = (*SandboxWaiter)(nil)

var errNoTerminals = conch.Errorf(conch.KindUnavailable, "no terminals are available")

// Wait implements Waiter.
func (w *SandboxWaiter) Wait(ctx context.Context, key conch.ConversationKey, spec WatchSpec, recovered bool) (string, error) {
	switch spec.On {
	case WatchExit:
		if w.Terminals == nil {
			return "", errNoTerminals
		}
		return w.Terminals.WaitExit(ctx, key, spec.Terminal, recovered)
	case WatchMatch:
		re, err := regexp.Compile(spec.Pattern)
		if err != nil {
			return "", fmt.Errorf("pattern: %w", err)
		}
		if w.Terminals == nil {
			return "", errNoTerminals
		}
		return w.Terminals.WaitMatch(ctx, key, spec.Terminal, re)
	case WatchFile:
		return w.waitFile(ctx, key, spec)
	}
	return "", fmt.Errorf("unknown watch condition %q", spec.On)
}

func (w *SandboxWaiter) waitFile(ctx context.Context, key conch.ConversationKey, spec WatchSpec) (string, error) {
	if w.Sandboxes == nil {
		return "", conch.Errorf(conch.KindUnavailable, "no sandbox runtime is configured")
	}
	for d := fileCheckFirst; ; d = min(2*d, fileCheckMax) {
		sb, err := w.Sandboxes.Sandbox(ctx, key)
		if err != nil {
			return "", err
		}
		stamp, err := FileStamp(ctx, sb, spec.Path)
		if err == nil && stamp != spec.Stamp {
			switch {
			case stamp == "":
				return spec.Path + " was removed.", nil
			case spec.Stamp == "":
				return spec.Path + " was created.", nil
			}
			return spec.Path + " changed.", nil
		}
		if err := backoff.Sleep(ctx, d); err != nil {
			return "", err
		}
	}
}

// FileStamp is a file's size and modification time in the sandbox, or ""
// when it does not exist.
func FileStamp(ctx context.Context, sb conch.Sandbox, p string) (string, error) {
	dir, name := path.Split(path.Clean(p))
	fis, err := sb.ListFiles(ctx, strings.TrimSuffix(dir, "/"))
	if err != nil {
		if conch.KindOf(err) == conch.KindNotFound {
			return "", nil
		}
		return "", err
	}
	for _, fi := range fis {
		if fi.Name == name {
			return fmt.Sprintf("%d:%d:%v", fi.Size, fi.ModTime.UnixNano(), fi.IsDir), nil
		}
	}
	return "", nil
}
