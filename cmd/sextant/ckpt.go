package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sextant/sextant/internal/client"
	"github.com/sextant/sextant/internal/volumes"
	"github.com/sextant/sextant/internal/wire"
)

// CkptCommand inspects and cleans up the PyTorch Distributed Checkpoints
// in a volume directory: one subdirectory per checkpoint, complete when
// its .metadata exists (the writer uploads it last).
type CkptCommand struct{ main *Main }

// lockLease reads the lease a writer lock declares ({"lease": seconds}).
func lockLease(ctx context.Context, cl *client.Client, p string) time.Duration {
	b, err := cl.ReadFile(ctx, p, 1<<16)
	if err != nil {
		return volumes.DefaultWriterLease
	}
	var lock struct {
		Lease float64 `json:"lease"`
	}
	if json.Unmarshal(b, &lock) != nil || lock.Lease <= 0 {
		return volumes.DefaultWriterLease
	}
	return time.Duration(lock.Lease * float64(time.Second))
}

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
		if len(pos) != 1 || !client.IsVolumePath(pos[0]) {
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
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", ck.Name, ck.Status(), humanBytes(ck.Size), ck.Files, ck.ModTime.UTC().Format(time.RFC3339))
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
					if cks[i].Complete {
						fmt.Fprintln(c.main.Stdout, cks[i].Path)
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
func listCheckpoints(ctx context.Context, cl *client.Client, dir string) ([]volumes.Checkpoint, time.Time, error) {
	entries, now, err := cl.ListDir(ctx, dir)
	if err != nil {
		return nil, time.Time{}, err
	}
	if now.IsZero() {
		now = time.Now()
	}
	var out []volumes.Checkpoint
	if ck, ok, err := describeCheckpoint(ctx, cl, dir, now); err != nil {
		return nil, now, err
	} else if ok && slices.ContainsFunc(entries, func(e wire.DirEntry) bool { return !e.IsDirectory && volumes.IsCheckpointFile(e.Name) }) {
		return []volumes.Checkpoint{ck}, now, nil
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
	volumes.SortCheckpoints(out)
	return out, now, nil
}

// describeCheckpoint lists a directory and describes it; ok is false when
// it holds no checkpoint.
func describeCheckpoint(ctx context.Context, cl *client.Client, dir string, now time.Time) (volumes.Checkpoint, bool, error) {
	files, _, err := cl.Walk(ctx, dir)
	if err != nil {
		return volumes.Checkpoint{}, false, err
	}
	cf := make([]volumes.CheckpointFile, len(files))
	for i, f := range files {
		cf[i] = volumes.CheckpointFile{Path: f.Path, Name: f.Name, Size: client.FileSize(f), ModTime: time.UnixMilli(f.LastModified)}
	}
	ck, ok := volumes.DescribeCheckpoint(dir, cf, now, func(p string) time.Duration { return lockLease(ctx, cl, p) })
	return ck, ok, nil
}

func (c *CkptCommand) gc(ctx context.Context, cl *client.Client, dir string, keep int, grace time.Duration, dry bool) error {
	m := c.main
	cks, now, err := listCheckpoints(ctx, cl, dir)
	if err != nil {
		return err
	}
	drop := volumes.CheckpointsToDelete(cks, now, keep, grace)
	var freed int64
	kept := 0
	for _, ck := range cks {
		why, ok := drop[ck.Path]
		if !ok {
			kept++
			continue
		}
		verb := "deleted"
		if dry {
			verb = "would delete"
		} else if _, err := cl.DeleteTree(ctx, ck.Path, 8, []string{volumes.MetadataName}); err != nil {
			return fmt.Errorf("delete %s: %w", ck.Path, err)
		}
		freed += ck.Size
		fmt.Fprintf(m.Stdout, "%s %s (%s, %s)\n", verb, ck.Name, why, humanBytes(ck.Size))
	}
	if dry {
		fmt.Fprintf(m.Stdout, "would keep %d checkpoint(s) and delete %d, %s (dry run: nothing was deleted)\n", kept, len(drop), humanBytes(freed))
	} else {
		fmt.Fprintf(m.Stdout, "kept %d checkpoint(s); %d deleted, %s\n", kept, len(drop), humanBytes(freed))
	}
	return nil
}
