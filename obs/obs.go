// Package obs sets up logging (log/slog, rotating files) and the audit trail
// (one JSON line per audited action, also written to the store).
package obs

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"gopkg.in/natefinch/lumberjack.v2"

	"conch"
)

// NewLogger returns a logger writing text or JSON to w at the given level.
func NewLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: use text or json", format)
}

// RotatingFile returns a writer to path that rotates at maxMB, keeping
// backups files for maxDays. The file is opened (created, with its
// directory) at the first write.
func RotatingFile(path string, maxMB, backups, maxDays int) io.WriteCloser {
	return &lumberjack.Logger{Filename: path, MaxSize: maxMB, MaxBackups: backups, MaxAge: maxDays, Compress: false}
}

// OpenRotatingFile is RotatingFile with the file opened now (created with
// its directory, 0700, if missing; an existing one is appended to, or
// rotated first if it is already full): a file that cannot be written is an
// error at start rather than a log line at the first record, and the
// process holds the file it writes from the start, so its open files do not
// grow at the first record (issue 22 row 11: the soak's open files against
// their baseline).
func OpenRotatingFile(path string, maxMB, backups, maxDays int) (io.WriteCloser, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	w := &lumberjack.Logger{Filename: path, MaxSize: maxMB, MaxBackups: backups, MaxAge: maxDays, Compress: false}
	// lumberjack opens its file at a write, and a write of nothing opens
	// it without writing (TestOpenRotatingFile holds it to that).
	if _, err := w.Write(nil); err != nil {
		return nil, err
	}
	return w, nil
}

// Audit writes each event as one JSON line to a file and to a store.
type Audit struct {
	mu    sync.Mutex
	w     io.Writer
	store conch.AuditStore
	log   *slog.Logger
}

var _ conch.AuditStore = (*Audit)(nil)

// NewAudit returns an auditor; w or store may be nil.
func NewAudit(w io.Writer, store conch.AuditStore, log *slog.Logger) *Audit {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Audit{w: w, store: store, log: log}
}

type auditLine struct {
	At           string          `json:"at"`
	Kind         conch.AuditKind `json:"kind"`
	Conversation string          `json:"conversation,omitempty"`
	Detail       json.RawMessage `json:"detail,omitempty"`
}

// Audit implements conch.AuditStore. The file gets the line even when the
// store fails, and the store error is returned.
func (a *Audit) Audit(ctx context.Context, ev conch.AuditEvent) error {
	if a.w != nil {
		line := auditLine{At: ev.At.UTC().Format("2006-01-02T15:04:05.000Z07:00"), Kind: ev.Kind, Detail: ev.Detail}
		if !ev.Conversation.IsZero() {
			line.Conversation = ev.Conversation.String()
		}
		b, err := json.Marshal(line)
		if err != nil {
			return fmt.Errorf("audit: encode: %w", err)
		}
		a.mu.Lock()
		_, err = a.w.Write(append(b, '\n'))
		a.mu.Unlock()
		if err != nil {
			a.log.Error("audit file write failed", "err", err)
		}
	}
	if a.store != nil {
		if err := a.store.Audit(ctx, ev); err != nil {
			return fmt.Errorf("audit: %w", err)
		}
	}
	return nil
}
