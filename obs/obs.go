// Package obs sets up logging (log/slog, rotating files) and the audit trail
// (one JSON line per audited action, also written to the store).
package obs

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
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
// backups files for maxDays.
func RotatingFile(path string, maxMB, backups, maxDays int) io.WriteCloser {
	return &lumberjack.Logger{Filename: path, MaxSize: maxMB, MaxBackups: backups, MaxAge: maxDays, Compress: false}
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
