package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sextant/sextant/internal/client"
	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/runlogs"
	"github.com/sextant/sextant/internal/tracking"
)

// LogsCommand is `sextant logs`: it prints a run's log, follows it live,
// filters it, or saves it as an artifact of the run.
type LogsCommand struct {
	main *Main
}

// LogsConfig is `sextant logs`' configuration.
type LogsConfig struct {
	TrackingURI  string
	Last         bool
	Experiment   string
	Follow       bool
	Grep         string
	Node         int
	Stream       string
	Since        string
	FromLine     int64
	Timestamps   bool
	Labels       bool
	SaveArtifact bool
	ArtifactName string
}

// parseInterleaved parses flags that may come before and after the
// positional arguments (sextant logs RUN_ID -f).
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// Run parses flags and prints the log.
func (c *LogsCommand) Run(ctx context.Context, fs *flag.FlagSet, args []string) error {
	m := c.main
	cfg := LogsConfig{Node: -1, ArtifactName: "output"}
	server := serverFlag(fs, m.Getenv)
	fs.BoolVar(&cfg.Last, "last", false, "the newest run: on a multi-user server the newest you started")
	fs.StringVar(&cfg.Experiment, "experiment", "", "with --last or a run name: look in this experiment only")
	fs.BoolVar(&cfg.Follow, "f", false, "follow: keep printing new lines until the run ends")
	fs.BoolVar(&cfg.Follow, "follow", false, "same as -f")
	fs.StringVar(&cfg.Grep, "grep", "", "only lines matching this regular expression (RE2 syntax; (?i) for any case)")
	fs.IntVar(&cfg.Node, "node", -1, "only lines of this node rank")
	fs.StringVar(&cfg.Stream, "stream", "", "only stdout or stderr")
	fs.StringVar(&cfg.Since, "since", "", "only lines from this time on: a duration back from now (10m, 2h) or a time (2026-01-02T15:04:05Z)")
	fs.Int64Var(&cfg.FromLine, "from-line", 1, "start at this line number")
	fs.BoolVar(&cfg.Timestamps, "timestamps", false, "prefix each line with its time")
	fs.BoolVar(&cfg.Labels, "labels", false, "prefix each line with its node, local rank and stream")
	fs.BoolVar(&cfg.SaveArtifact, "save-artifact", false, "store the log as the run's artifact logs/<name>.txt instead of printing it")
	fs.StringVar(&cfg.ArtifactName, "artifact-name", cfg.ArtifactName, "the <name> of --save-artifact")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	cfg.TrackingURI = *server
	switch {
	case cfg.Last && len(pos) > 0:
		return usageError("logs: give a RUN_ID or RUN_NAME, or --last, not both")
	case !cfg.Last && len(pos) != 1:
		return usageError("logs: give one RUN_ID or RUN_NAME, or --last (see 'sextant logs -h')")
	}
	q := runlogs.Query{FromLine: cfg.FromLine, Regexp: cfg.Grep, Limit: 5000}
	if cfg.Node >= 0 {
		n := int32(cfg.Node)
		q.Node = &n
	}
	if cfg.Stream != "" {
		st, ok := runlogs.ParseStream(cfg.Stream)
		if !ok {
			return &exitError{code: 2, err: &ConfigError{"stream", fmt.Sprintf("must be stdout or stderr, got %q", cfg.Stream)}}
		}
		q.Stream = st
	}
	if cfg.Since != "" {
		t, err := parseSince(cfg.Since, time.Now())
		if err != nil {
			return &exitError{code: 2, err: &ConfigError{"since", err.Error()}}
		}
		q.SinceMs = t.UnixMilli()
	}
	if strings.ContainsAny(cfg.ArtifactName, "/\\") || cfg.ArtifactName == "" || cfg.ArtifactName == "." || cfg.ArtifactName == ".." {
		return &exitError{code: 2, err: &ConfigError{"artifact-name", "must be a plain file name"}}
	}
	cl, err := m.newClient(cfg.TrackingURI, "sextant-logs")
	if err != nil {
		return err
	}
	var run *tracking.Run
	if cfg.Last {
		run, err = lastRun(ctx, cl, cfg.Experiment)
	} else {
		run, err = findRun(ctx, cl, m.Stderr, pos[0], cfg.Experiment)
	}
	if err != nil {
		return err
	}
	q.RunID = run.Info.RunID
	if cfg.Last || pos[0] != run.Info.RunID {
		// Say which run: the user did not give its id.
		fmt.Fprintf(m.Stderr, "sextant: run %s (%s), %s, started %s\n", run.Info.RunID, orDash(run.Info.RunName), run.Info.Status, fmtTime(run.Info.StartTimeMs))
	}
	if cfg.SaveArtifact {
		return c.save(ctx, cl, q, cfg.ArtifactName)
	}
	w := bufio.NewWriterSize(m.Stdout, 64<<10)
	defer w.Flush()
	p := linePrinter{w: w, timestamps: cfg.Timestamps, labels: cfg.Labels}
	err = c.print(ctx, cl, q, cfg.Follow, &p)
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil // Ctrl-C while following
	}
	return err
}

func (c *LogsCommand) print(ctx context.Context, cl *client.Client, q runlogs.Query, follow bool, p *linePrinter) error {
	for {
		page, err := cl.ReadLogs(ctx, q)
		if err != nil {
			return err
		}
		if err := p.print(page.Lines); err != nil {
			return err
		}
		q.FromLine = page.NextLine
		if page.Done() {
			break
		}
	}
	if !follow {
		return nil
	}
	for {
		if err := p.w.Flush(); err != nil {
			return err
		}
		page, err := cl.TailLogs(ctx, q, 25*time.Second)
		if err != nil {
			if errs.CodeOf(err) == errs.Unavailable && ctx.Err() == nil {
				// The server restarts or a proxy cut the poll: go on.
				time.Sleep(time.Second)
				continue
			}
			return err
		}
		if err := p.print(page.Lines); err != nil {
			return err
		}
		q.FromLine = page.NextLine
		if len(page.Lines) == 0 && page.Head.RunStatus.Terminal() && page.Done() {
			return nil
		}
	}
}

// save stores the run's log as the artifact logs/<name>.txt: the log as a
// terminal leaves it (carriage-return records, the redraws of progress
// bars, are left out).
func (c *LogsCommand) save(ctx context.Context, cl *client.Client, q runlogs.Query, name string) error {
	run, err := cl.GetRun(ctx, q.RunID)
	if err != nil {
		return err
	}
	base, err := client.ArtifactPath(run.Info.ArtifactURI)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp("", "sextant-logs-*.txt")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	lines := int64(0)
	for {
		page, err := cl.ReadLogs(ctx, q)
		if err != nil {
			return err
		}
		for i := range page.Lines {
			l := &page.Lines[i]
			if l.Flags&runlogs.FlagCR != 0 {
				continue
			}
			w.WriteString(l.Text)
			w.WriteString(l.Terminator())
			lines++
		}
		q.FromLine = page.NextLine
		if page.Done() {
			break
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write the log: %w", err)
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	dest := base + "/logs/" + name + ".txt"
	if err := cl.PutArtifact(ctx, dest, f, size); err != nil {
		return fmt.Errorf("upload %s: %w", dest, err)
	}
	fmt.Fprintf(c.main.Stderr, "saved %d lines (%d bytes) as artifact logs/%s.txt of run %s\n", lines, size, name, q.RunID)
	return nil
}

// linePrinter writes lines as the job printed them: each text followed by
// its terminator ("\n", "\r" for a progress-bar redraw, nothing for a
// partial record), optionally prefixed.
type linePrinter struct {
	w          *bufio.Writer
	timestamps bool
	labels     bool
	buf        []byte
}

func (p *linePrinter) print(lines []runlogs.Line) error {
	for i := range lines {
		l := &lines[i]
		b := p.buf[:0]
		if p.timestamps {
			b = time.UnixMilli(l.TimestampMs).UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z ")
		}
		if p.labels {
			b = append(b, "[node "...)
			b = strconv.AppendInt(b, int64(l.Node), 10)
			if l.LocalRank >= 0 {
				b = append(b, " rank "...)
				b = strconv.AppendInt(b, int64(l.LocalRank), 10)
			}
			b = append(b, ' ')
			b = append(b, l.Stream.String()...)
			b = append(b, "] "...)
		}
		b = append(b, l.Text...)
		b = append(b, l.Terminator()...)
		p.buf = b
		if _, err := p.w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// parseSince reads --since: a duration back from now, or a time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%q is negative", s)
		}
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is neither a duration (10m, 2h) nor a time (2026-01-02T15:04:05Z)", s)
}
