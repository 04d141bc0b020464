package main

import (
	"io"
	"log/slog"
)

// newLogger returns the logger the config asks for (level, text or JSON).
func newLogger(w io.Writer, cfg Config) *slog.Logger {
	return slog.New(logHandler(w, cfg.LogLevel, cfg.LogFormat))
}

// logHandler returns the handler of a command's log: level is a
// --log-level value (already validated), format "json" or text.
func logHandler(w io.Writer, level, format string) slog.Handler {
	l, _ := parseLevel(level)
	hopts := &slog.HandlerOptions{Level: l}
	if format == "json" {
		return slog.NewJSONHandler(w, hopts)
	}
	return slog.NewTextHandler(w, hopts)
}
