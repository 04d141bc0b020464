package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/sextant/sextant/internal/gpu"
	"github.com/sextant/sextant/internal/progress"
	"github.com/sextant/sextant/internal/runevents"
	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/webhook"
)

// WatchConfig configures the watcher of idle and stalled runs and stragglers.
type WatchConfig struct {
	// IdleUtil is the GPU utilisation, in percent, under which a run's GPUs
	// are idle.
	IdleUtil float64
	// IdleFor and StallFor are how long a run must be idle, or produce
	// nothing, before it gets an event; 0 turns that check off.
	IdleFor, StallFor time.Duration
	// StragglerMargin is how far above the other ranks' median step time a
	// rank's must stay (0.2: 20%) for StragglerFor to be flagged as a
	// straggler; StragglerFor 0 turns that check off.
	StragglerMargin float64
	StragglerFor    time.Duration
	// Every is the time between two looks.
	Every time.Duration
	// Webhook receives the notifications; empty means none.
	Webhook string
	// PublicURL is the server's address as people reach it, for the run
	// links in notifications; empty leaves them out.
	PublicURL string
}

// DefaultWatchConfig returns the watcher's defaults.
func DefaultWatchConfig() WatchConfig {
	return WatchConfig{IdleUtil: 5, IdleFor: 10 * time.Minute, StallFor: 15 * time.Minute, StragglerMargin: 0.2, StragglerFor: 2 * time.Minute, Every: 30 * time.Second}
}

// Validate checks the watcher's configuration.
func (c *WatchConfig) Validate() error {
	switch {
	case c.IdleUtil <= 0 || c.IdleUtil > 100:
		return &ConfigError{"idle-util", fmt.Sprintf("must be a percentage above 0, got %v", c.IdleUtil)}
	case c.IdleFor < 0 || c.StallFor < 0:
		return &ConfigError{"idle-for", "durations must be 0 (off) or more"}
	case c.StragglerFor < 0:
		return &ConfigError{"straggler-for", "must be 0 (off) or more"}
	case !(c.StragglerMargin > 0 && c.StragglerMargin <= 100):
		return &ConfigError{"straggler-margin", fmt.Sprintf("must be above 0 (0.2: 20%% slower than the other ranks' median), got %v", c.StragglerMargin)}
	case c.Every < 100*time.Millisecond:
		return &ConfigError{"watch-every", fmt.Sprintf("must be at least 100ms, got %s", c.Every)}
	case c.Webhook != "" && !strings.HasPrefix(c.Webhook, "http://") && !strings.HasPrefix(c.Webhook, "https://"):
		return &ConfigError{"alert-webhook", fmt.Sprintf("must be an http(s) URL, got %s... (the rest is not shown: a webhook URL is a secret)", webhook.Redact(c.Webhook))}
	}
	return nil
}

// bindWatchFlags binds the watcher's flags (and SEXTANT_* variables).
func bindWatchFlags(fs *flag.FlagSet, c *WatchConfig, getenv func(string) string) (envErr error) {
	env := func(name string) (string, string, bool) {
		k := "SEXTANT_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		v := getenv(k)
		return v, k, v != ""
	}
	duration := func(p *time.Duration, name, usage string) {
		if v, k, ok := env(name); ok {
			d, err := time.ParseDuration(v)
			if err != nil && envErr == nil {
				envErr = &ConfigError{name, fmt.Sprintf("%s must be a duration such as 10m, got %q", k, v)}
			}
			*p = d
		}
		fs.DurationVar(p, name, *p, usage)
	}
	number := func(p *float64, name, usage string) {
		if v, k, ok := env(name); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil && envErr == nil {
				envErr = &ConfigError{name, fmt.Sprintf("%s must be a number, got %q", k, v)}
			}
			*p = f
		}
		fs.Float64Var(p, name, *p, usage)
	}
	number(&c.IdleUtil, "idle-util", "a running run whose GPUs all stay under this utilisation (percent) for --idle-for gets an idle event")
	number(&c.StragglerMargin, "straggler-margin", "a rank whose median step time stays this fraction above the other ranks' median (0.2: 20%) for --straggler-for gets a straggler event")
	duration(&c.IdleFor, "idle-for", "how long a running run's GPUs must stay idle before it gets an event (0: off)")
	duration(&c.StallFor, "stall-for", "how long a running run may log no metrics, output or events before it gets a stalled event (0: off)")
	duration(&c.StragglerFor, "straggler-for", "how long a rank must stay slower than the others by --straggler-margin before it gets a straggler event (0: off)")
	duration(&c.Every, "watch-every", "time between two looks at the running runs")
	for _, s := range []struct {
		p          *string
		name, help string
	}{
		{&c.Webhook, "alert-webhook", "POST a JSON notification here when a run turns idle or stalled, and when it moves again (off when empty)"},
		{&c.PublicURL, "public-url", "the server's address as people reach it, for run links in notifications (e.g. https://sextant.example.com)"},
	} {
		if v, _, ok := env(s.name); ok {
			*s.p = v
		}
		fs.StringVar(s.p, s.name, *s.p, s.help)
	}
	return envErr
}

// runTagger sets and deletes run tags through the tracking service.
type runTagger struct{ tr *tracking.Service }

func (t runTagger) SetRunTag(ctx context.Context, runID, key, value string) error {
	return t.tr.SetTag(ctx, runID, tracking.Tag{Key: key, Value: value})
}

func (t runTagger) DeleteRunTag(ctx context.Context, runID, key string) error {
	return t.tr.DeleteTag(ctx, runID, key)
}

// startWatcher starts the watcher of idle and stalled runs, on the replica
// that holds its lease; the returned function stops it.
func startWatcher(cfg WatchConfig, store *sqlstore.Store, events *sqlstore.EventStore, eventSvc *runevents.Service, gpuSvc *gpu.Service, tr *tracking.Service, log *slog.Logger) (func(), error) {
	if cfg.IdleFor == 0 && cfg.StallFor == 0 && cfg.StragglerFor == 0 && cfg.Webhook == "" { // with a webhook, launchers' hung spans are told
		return func() {}, nil
	}
	opts := runevents.WatchOptions{
		IdleUtil: cfg.IdleUtil, IdleFor: cfg.IdleFor, StallFor: cfg.StallFor, Every: cfg.Every, GPUs: gpuSvc, Tags: runTagger{tr},
		StragglerMargin: cfg.StragglerMargin, StragglerFor: cfg.StragglerFor, Progress: progress.NewService(tr, nil),
		Leader: func(ctx context.Context) bool { return store.Leader(ctx, "run-watch", cfg.Every) }, Logger: log.With("component", "run-watch"),
	}
	// 0 turns a check off here; the watcher's own 0 means its default.
	if cfg.IdleFor == 0 {
		opts.IdleFor = -1
	}
	if cfg.StallFor == 0 {
		opts.StallFor = -1
	}
	if cfg.StragglerFor == 0 {
		opts.StragglerFor = -1
	}
	var sender *webhook.Sender
	if cfg.Webhook != "" {
		runURL := ""
		if cfg.PublicURL != "" {
			runURL = strings.TrimRight(cfg.PublicURL, "/") + "/#/experiments/%s/runs/%s"
		}
		s, err := webhook.New(webhook.Options{URL: cfg.Webhook, RunURL: runURL, Logger: log.With("component", "webhook")})
		if err != nil {
			return nil, &ConfigError{"alert-webhook", err.Error()}
		}
		sender = s
		opts.Notifier = s
	}
	w := runevents.NewWatcher(eventSvc, events, opts)
	w.Start()
	return func() {
		w.Close()
		if sender != nil {
			sender.Close()
		}
	}, nil
}
