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
	"conch/terminal"
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
	Terminals terminal.Provider
	Sandboxes conch.SandboxProvider
}

var _ Waiter = (*SandboxWaiter)(nil)

// Wait implements Waiter.
func (w *SandboxWaiter) Wait(ctx context.Context, key conch.ConversationKey, spec WatchSpec, recovered bool) (string, error) {
	switch spec.On {
	case WatchExit:
		return w.waitExit(ctx, key, spec.Terminal, recovered)
	case WatchMatch:
		re, err := regexp.Compile(spec.Pattern)
		if err != nil {
			return "", fmt.Errorf("pattern: %w", err)
		}
		return w.waitMatch(ctx, key, spec.Terminal, re)
	case WatchFile:
		return w.waitFile(ctx, key, spec)
	}
	return "", fmt.Errorf("unknown watch condition %q", spec.On)
}

// manager returns the conversation's terminal Manager, waiting for a new
// one when it was just replaced.
func (w *SandboxWaiter) manager(ctx context.Context, key conch.ConversationKey) (*terminal.Manager, error) {
	if w.Terminals == nil {
		return nil, conch.Errorf(conch.KindUnavailable, "no terminals are available")
	}
	return w.Terminals.Manager(ctx, key)
}

func (w *SandboxWaiter) waitExit(ctx context.Context, key conch.ConversationKey, n int, recovered bool) (string, error) {
	for {
		m, err := w.manager(ctx, key)
		if err != nil {
			return "", err
		}
		info, err := m.AwaitExit(ctx, n, recovered)
		if terminal.IsDetached(err) {
			recovered = true
			if err := backoff.Sleep(ctx, time.Second); err != nil {
				return "", err
			}
			continue
		}
		if err != nil {
			return "", err
		}
		switch {
		case info.Closed:
			return fmt.Sprintf("Terminal %d was closed.", n), nil
		case info.Known:
			return fmt.Sprintf("The command in terminal %d exited with status %d.", n, info.Code), nil
		}
		return fmt.Sprintf("The command in terminal %d ended (its exit status is not known: it ended while conch was not watching).", n), nil
	}
}

func (w *SandboxWaiter) waitMatch(ctx context.Context, key conch.ConversationKey, n int, re *regexp.Regexp) (string, error) {
	for {
		m, err := w.manager(ctx, key)
		if err != nil {
			return "", err
		}
		line, err := m.AwaitOutput(ctx, n, re)
		if terminal.IsDetached(err) {
			if err := backoff.Sleep(ctx, time.Second); err != nil {
				return "", err
			}
			continue
		}
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("Terminal %d printed: %s", n, line), nil
	}
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
