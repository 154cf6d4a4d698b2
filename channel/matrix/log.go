package matrix

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/rs/zerolog"
)

// zerologFor returns a zerolog.Logger (what mautrix logs with) that writes
// into the slog logger.
func zerologFor(l *slog.Logger) zerolog.Logger {
	level := zerolog.InfoLevel
	if l.Enabled(context.Background(), slog.LevelDebug) {
		level = zerolog.DebugLevel
	}
	return zerolog.New(slogWriter{l}).Level(level).With().Timestamp().Logger()
}

// slogWriter receives zerolog's JSON lines and re-emits them as slog records.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	var fields map[string]any
	if err := json.Unmarshal(p, &fields); err != nil {
		w.l.Info(string(p))
		return len(p), nil
	}
	level := slog.LevelInfo
	switch fields[zerolog.LevelFieldName] {
	case "trace", "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error", "fatal", "panic":
		level = slog.LevelError
	}
	msg, _ := fields[zerolog.MessageFieldName].(string)
	delete(fields, zerolog.LevelFieldName)
	delete(fields, zerolog.MessageFieldName)
	delete(fields, zerolog.TimestampFieldName)
	attrs := make([]slog.Attr, 0, len(fields)+1)
	attrs = append(attrs, slog.String("lib", "mautrix"))
	for k, v := range fields {
		attrs = append(attrs, slog.Any(k, v))
	}
	w.l.LogAttrs(context.Background(), level, msg, attrs...)
	return len(p), nil
}
