package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sextant/sextant/internal/client"
	"github.com/sextant/sextant/internal/wire"
)

// CkptCommand inspects and cleans up the PyTorch Distributed Checkpoints
// in a volume directory: one subdirectory per checkpoint, complete when
// its .metadata exists (the writer uploads it last).
type CkptCommand struct{ main *Main }

// Names of the files the checkpoint writer (python/sextant/checkpoint.py)
// uses.
const (
	ckptMetadata = ".metadata"
	ckptLock     = ".sextant-writer"
	// ckptLease is how long a writer lock stays fresh without a refresh
	// when it does not say (VolumeWriter's default lease_seconds).
	ckptLease = 60 * time.Second
)

// lockLease reads the lease a writer lock declares ({"lease": seconds}).
func lockLease(ctx context.Context, cl *client.Client, p string) time.Duration {
	b, err := cl.ReadFile(ctx, p, 1<<16)
	if err != nil {
		return ckptLease
	}
	var lock struct {
		Lease float64 `json:"lease"`
	}
	if json.Unmarshal(b, &lock) != nil || lock.Lease <= 0 {
		return ckptLease
	}
	return time.Duration(lock.Lease * float64(time.Second))
}

// checkpoint is one checkpoint directory.
type checkpoint struct {
	path, name string
	complete   bool
	writing    bool
	size       int64
	files      int
	mtime      time.Time
	step       int64
	hasStep    bool
}

func (c checkpoint) status() string {
	switch {
	case c.complete:
		return "complete"
	case c.writing:
		return "writing"
	}
	return "incomplete"
}

var trailingNumber = regexp.MustCompile(`(\d+)$`)

// ckptCommand is a leaf of `sextant ckpt`: flags and --server, then one
// /Volumes path (flags may follow it), then do.
func ckptCommand(extra func(fs *flag.FlagSet), do func(ctx context.Context, c *CkptCommand, cl *client.Client, dir string) error) func(ctx context.Context, m *Main, fs *flag.FlagSet, args []string) error {
	return func(ctx context.Context, m *Main, fs *flag.FlagSet, args []string) error {
		var a apiFlags
		a.bind(fs, m.Getenv)
		if extra != nil {
			extra(fs)
		}
		pos, err := parseInterleaved(fs, args)
		if err != nil {
			return err
		}
		if len(pos) != 1 || !isVolumePath(pos[0]) {
			return usageError("%s takes one /Volumes path (see 'sextant %s -h')", fs.Name(), fs.Name())
		}
		cl, err := m.newClient(a.server, "sextant")
		if err != nil {
			return err
		}
		return do(ctx, &CkptCommand{main: m}, cl, strings.TrimRight(pos[0], "/"))
	}
}

func ckptCommands() []*command {
	var keep int
	var grace time.Duration
	var dry bool
	return []*command{
		{
			name: "ls", summary: "each checkpoint under a path: complete, incomplete or writing; size; time",
			usage:    []string{"sextant ckpt ls /Volumes/PATH", "sextant ckpt ls --run RUN_ID"},
			about:    "With --run, the checkpoints the run's VolumeWriter recorded: step, path, outcome, size, ranks,\nmode and staging, time training was blocked, upload time, when it landed.",
			env:      clientEnv,
			examples: []string{"sextant ckpt ls /Volumes/main/vision/ckpt", "sextant ckpt ls --run 3f9a0c2e5b7d4e1f8a6b9c0d1e2f3a4b"},
			run: ckptCommandOrRun("ls", func(ctx context.Context, c *CkptCommand, cl *client.Client, dir string) error {
				cks, _, err := listCheckpoints(ctx, cl, dir)
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(c.main.Stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "CHECKPOINT\tSTATUS\tSIZE\tFILES\tTIME")
				for _, ck := range cks {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", ck.name, ck.status(), humanBytes(ck.size), ck.files, ck.mtime.UTC().Format(time.RFC3339))
				}
				return tw.Flush()
			}),
		},
		{
			name: "latest", summary: "print the path of the newest complete checkpoint",
			usage:    []string{"sextant ckpt latest /Volumes/PATH", "sextant ckpt latest --run RUN_ID"},
			about:    "Prints the path of the newest complete checkpoint under PATH (with --run: that the run recorded);\nexits 1 when there is none.",
			env:      clientEnv,
			examples: []string{"python train.py --resume-from $(sextant ckpt latest /Volumes/main/vision/ckpt)"},
			run: ckptCommandOrRun("latest", func(ctx context.Context, c *CkptCommand, cl *client.Client, dir string) error {
				cks, _, err := listCheckpoints(ctx, cl, dir)
				if err != nil {
					return err
				}
				for i := len(cks) - 1; i >= 0; i-- {
					if cks[i].complete {
						fmt.Fprintln(c.main.Stdout, cks[i].path)
						return nil
					}
				}
				return &exitError{code: 1, err: fmt.Errorf("no complete checkpoint under %s", dir)}
			}),
		},
		{
			name: "gc", summary: "delete all but the newest complete checkpoints, and abandoned ones",
			usage: []string{"sextant ckpt gc /Volumes/PATH --keep-last N [--grace 1h] [--dry-run]"},
			about: "Deletes all but the N newest complete checkpoints, and incomplete ones older than the grace\nperiod that no writer holds. --dry-run only says what it would delete.",
			env:   clientEnv,
			examples: []string{
				"sextant ckpt gc /Volumes/main/vision/ckpt --keep-last 3 --dry-run",
				"sextant ckpt gc /Volumes/main/vision/ckpt --keep-last 3",
			},
			run: ckptCommand(func(fs *flag.FlagSet) {
				fs.IntVar(&keep, "keep-last", -1, "complete checkpoints to keep (required)")
				fs.DurationVar(&grace, "grace", time.Hour, "incomplete checkpoints younger than this are kept (they may be in progress)")
				fs.BoolVar(&dry, "dry-run", false, "print what would be deleted, and delete nothing")
			}, func(ctx context.Context, c *CkptCommand, cl *client.Client, dir string) error {
				if keep < 0 {
					return usageError("ckpt gc needs --keep-last N")
				}
				return c.gc(ctx, cl, dir, keep, grace, dry)
			}),
		},
	}
}

// listCheckpoints describes the checkpoints in the subdirectories of dir
// (or dir itself, when it is one), oldest first. It also returns the
// server's clock.
func listCheckpoints(ctx context.Context, cl *client.Client, dir string) ([]checkpoint, time.Time, error) {
	entries, now, err := cl.ListDir(ctx, dir)
	if err != nil {
		return nil, time.Time{}, err
	}
	if now.IsZero() {
		now = time.Now()
	}
	var out []checkpoint
	if ck, ok, err := describeCheckpoint(ctx, cl, dir, now); err != nil {
		return nil, now, err
	} else if ok && hasCheckpointFiles(entries) {
		return []checkpoint{ck}, now, nil
	}
	for _, e := range entries {
		if !e.IsDirectory {
			continue
		}
		ck, ok, err := describeCheckpoint(ctx, cl, e.Path, now)
		if err != nil {
			return nil, now, err
		}
		if ok {
			out = append(out, ck)
		}
	}
	byStep := len(out) > 0
	for _, ck := range out {
		byStep = byStep && ck.hasStep
	}
	sort.SliceStable(out, func(i, j int) bool {
		if byStep && out[i].step != out[j].step {
			return out[i].step < out[j].step
		}
		return out[i].mtime.Before(out[j].mtime)
	})
	return out, now, nil
}

func hasCheckpointFiles(entries []wire.DirEntry) bool {
	for _, e := range entries {
		if !e.IsDirectory && (e.Name == ckptMetadata || strings.HasSuffix(e.Name, ".distcp")) {
			return true
		}
	}
	return false
}

// describeCheckpoint reads a directory; ok is false when it holds no
// checkpoint (.metadata, .distcp shards or a writer's lock).
func describeCheckpoint(ctx context.Context, cl *client.Client, dir string, now time.Time) (checkpoint, bool, error) {
	files, _, err := cl.Walk(ctx, dir)
	if err != nil {
		return checkpoint{}, false, err
	}
	ck := checkpoint{path: dir, name: path.Base(dir)}
	if m := trailingNumber.FindString(ck.name); m != "" {
		ck.step, _ = strconv.ParseInt(m, 10, 64)
		ck.hasStep = true
	}
	shards, lock := false, false
	var newest, meta time.Time
	for _, f := range files {
		mt := time.UnixMilli(f.LastModified)
		ck.size += fileSize(f)
		ck.files++
		if mt.After(newest) {
			newest = mt
		}
		top := path.Dir(f.Path) == dir
		switch {
		case top && f.Name == ckptMetadata:
			ck.complete, meta = true, mt
		case top && f.Name == ckptLock:
			lock = true
			ck.writing = now.Sub(mt) < lockLease(ctx, cl, f.Path)
		case strings.HasSuffix(f.Name, ".distcp"):
			shards = true
		}
	}
	ck.mtime = newest
	if ck.complete {
		ck.mtime = meta
	}
	// A directory with shards, or with a writer's lock (whose save may have
	// died before any shard landed), is a checkpoint, if an incomplete one.
	return ck, ck.complete || shards || lock, nil
}

func (c *CkptCommand) gc(ctx context.Context, cl *client.Client, dir string, keep int, grace time.Duration, dry bool) error {
	m := c.main
	cks, now, err := listCheckpoints(ctx, cl, dir)
	if err != nil {
		return err
	}
	var complete []checkpoint
	for _, ck := range cks {
		if ck.complete {
			complete = append(complete, ck)
		}
	}
	drop := map[string]string{}
	for i, ck := range complete {
		if i < len(complete)-keep {
			drop[ck.path] = "complete, older than the newest " + strconv.Itoa(keep)
		}
	}
	for _, ck := range cks {
		// The server's clock has whole seconds: a file written this second
		// may look a little younger than zero.
		if age := max(now.Sub(ck.mtime), 0); !ck.complete && !ck.writing && age >= grace {
			drop[ck.path] = "incomplete, untouched for " + age.Round(time.Second).String()
		}
	}
	var freed int64
	kept := 0
	for _, ck := range cks {
		why, ok := drop[ck.path]
		if !ok {
			kept++
			continue
		}
		verb := "deleted"
		if dry {
			verb = "would delete"
		} else if _, err := deleteTree(ctx, cl, ck.path, 8, []string{ckptMetadata}); err != nil {
			return fmt.Errorf("delete %s: %w", ck.path, err)
		}
		freed += ck.size
		fmt.Fprintf(m.Stdout, "%s %s (%s, %s)\n", verb, ck.name, why, humanBytes(ck.size))
	}
	if dry {
		fmt.Fprintf(m.Stdout, "would keep %d checkpoint(s) and delete %d, %s (dry run: nothing was deleted)\n", kept, len(drop), humanBytes(freed))
	} else {
		fmt.Fprintf(m.Stdout, "kept %d checkpoint(s); %d deleted, %s\n", kept, len(drop), humanBytes(freed))
	}
	return nil
}
