package main

import (
	"io"
	"log/slog"
)

// newLogger returns the logger the config asks for (level, text or JSON).
func newLogger(w io.Writer, cfg Config) *slog.Logger {
	level, _ := parseLevel(cfg.LogLevel)
	hopts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, hopts))
	}
	return slog.New(slog.NewTextHandler(w, hopts))
}
