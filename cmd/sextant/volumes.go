package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/sextant/sextant/internal/client"
	"github.com/sextant/sextant/internal/errs"
)

// VolumesCommand manages catalogs, schemas and volumes, and copies files
// to and from volumes.
type VolumesCommand struct{ main *Main }

// volumesCommand is a leaf of `sextant volumes`: flags and --server, then
// positional arguments (flags may follow them), then do.
func volumesCommand(minArgs, maxArgs int, extra func(fs *flag.FlagSet), do func(ctx context.Context, c *VolumesCommand, cl *client.Client, args []string) error) func(ctx context.Context, m *Main, fs *flag.FlagSet, args []string) error {
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
		if len(pos) < minArgs || len(pos) > maxArgs {
			return usageError("%s: wrong number of arguments (see 'sextant %s -h')", fs.Name(), fs.Name())
		}
		cl, err := m.newClient(a.server, "sextant")
		if err != nil {
			return err
		}
		return do(ctx, &VolumesCommand{main: m}, cl, pos)
	}
}

func volumesCommands() []*command {
	var comment, progress string
	var parents, recursive, overwrite, force bool
	var jobs int
	return []*command{
		{
			name: "create", summary: "create a catalog, a schema or a volume",
			usage: []string{"sextant volumes create NAME [--comment TEXT] [-p]"},
			about: "NAME is CATALOG, CATALOG.SCHEMA or CATALOG.SCHEMA.VOLUME; -p creates the catalog and the\nschema too when they are missing.",
			env:   clientEnv,
			examples: []string{
				"sextant volumes create main.vision.ckpt -p --comment 'checkpoints of the vision team'",
			},
			run: volumesCommand(1, 1, func(fs *flag.FlagSet) {
				fs.StringVar(&comment, "comment", "", "comment of the new catalog, schema or volume")
				fs.BoolVar(&parents, "p", false, "create the catalog and schema too when missing")
			}, func(ctx context.Context, c *VolumesCommand, cl *client.Client, args []string) error {
				return c.create(ctx, cl, args[0], comment, parents)
			}),
		},
		{
			name: "ls", summary: "list catalogs, schemas, volumes, or the files in a volume",
			usage: []string{"sextant volumes ls [CATALOG | CATALOG.SCHEMA | /Volumes/PATH]"},
			about: "No argument: the catalogs; CATALOG: its schemas; CATALOG.SCHEMA: its volumes; a /Volumes path:\nthe files and directories in it.",
			env:   clientEnv,
			examples: []string{
				"sextant volumes ls main.vision",
				"sextant volumes ls /Volumes/main/vision/ckpt",
			},
			run: volumesCommand(0, 1, nil, func(ctx context.Context, c *VolumesCommand, cl *client.Client, args []string) error {
				arg := ""
				if len(args) == 1 {
					arg = args[0]
				}
				return c.ls(ctx, cl, arg)
			}),
		},
		{
			name: "cp", summary: "copy files between the local disk and a volume",
			usage: []string{"sextant volumes cp SRC DST [-r] [-j N] [--overwrite=false] [--progress auto|on|off]"},
			about: "Copies local files to a volume or back: exactly one of SRC and DST is a /Volumes path. -r copies\ndirectories, -j transfers N files at once.",
			env:   clientEnv,
			examples: []string{
				"sextant volumes cp model.pt /Volumes/main/vision/ckpt/",
				"sextant volumes cp -r /Volumes/main/vision/ckpt/step-1000 ./restore",
			},
			run: volumesCommand(2, 2, func(fs *flag.FlagSet) {
				fs.BoolVar(&recursive, "r", false, "copy directories and all they hold")
				fs.IntVar(&jobs, "j", 8, "files transferred at once")
				fs.BoolVar(&overwrite, "overwrite", true, "replace files that exist at the destination")
				fs.StringVar(&progress, "progress", "auto", "progress on stderr: auto (when it is a terminal), on or off")
			}, func(ctx context.Context, c *VolumesCommand, cl *client.Client, args []string) error {
				if jobs < 1 {
					return usageError("volumes cp: -j must be at least 1")
				}
				show, err := showProgress(progress, c.main.Stderr)
				if err != nil {
					return usageError("volumes cp: %v", err)
				}
				return c.cp(ctx, cl, args[0], args[1], cpOptions{recursive: recursive, jobs: jobs, overwrite: overwrite, progress: show})
			}),
		},
		{
			name: "rm", summary: "delete files, directories, volumes, schemas or catalogs",
			usage: []string{"sextant volumes rm /Volumes/PATH [-r]", "sextant volumes rm CATALOG[.SCHEMA[.VOLUME]] [--force]"},
			about: "Deletes a file, an empty directory, or (-r) a directory and all it holds; or a volume (with its\nfiles), or an empty schema or catalog (--force: with everything in it).",
			env:   clientEnv,
			examples: []string{
				"sextant volumes rm -r /Volumes/main/vision/ckpt/step-100",
				"sextant volumes rm main.vision.ckpt",
			},
			run: volumesCommand(1, 1, func(fs *flag.FlagSet) {
				fs.BoolVar(&recursive, "r", false, "delete a directory and all it holds")
				fs.BoolVar(&force, "force", false, "rm of a catalog or schema: delete everything in it")
			}, func(ctx context.Context, c *VolumesCommand, cl *client.Client, args []string) error {
				return c.rm(ctx, cl, args[0], recursive, force)
			}),
		},
	}
}

func showProgress(mode string, w io.Writer) (bool, error) {
	switch mode {
	case "on":
		return true, nil
	case "off":
		return false, nil
	case "auto":
		f, ok := w.(*os.File)
		if !ok {
			return false, nil
		}
		fi, err := f.Stat()
		return err == nil && fi.Mode()&os.ModeCharDevice != 0, nil
	}
	return false, fmt.Errorf("--progress must be auto, on or off, got %q", mode)
}

func (c *VolumesCommand) create(ctx context.Context, cl *client.Client, name, comment string, parents bool) error {
	parts := strings.Split(name, ".")
	if len(parts) > 3 || slicesContainsEmpty(parts) {
		return fmt.Errorf("%q is not CATALOG, CATALOG.SCHEMA or CATALOG.SCHEMA.VOLUME", name)
	}
	// With -p the catalog and the schema are created first, when missing.
	steps := []func(comment string) error{
		func(comment string) error { return cl.CreateCatalog(ctx, parts[0], comment) },
	}
	if len(parts) >= 2 {
		steps = append(steps, func(comment string) error { return cl.CreateSchema(ctx, parts[0], parts[1], comment) })
	}
	if len(parts) == 3 {
		steps = append(steps, func(comment string) error { return cl.CreateVolume(ctx, parts[0], parts[1], parts[2], comment) })
	}
	if !parents {
		steps = steps[len(steps)-1:]
	}
	for i, step := range steps {
		last := i == len(steps)-1
		c := ""
		if last {
			c = comment
		}
		err := step(c)
		if err != nil && !last && isConflict(err) {
			continue // -p: the parent exists
		}
		if err != nil {
			return err
		}
	}
	kind := []string{"catalog", "schema", "volume"}[len(parts)-1]
	fmt.Fprintf(c.main.Stdout, "created %s %s", kind, name)
	if len(parts) == 3 {
		fmt.Fprintf(c.main.Stdout, " (/Volumes/%s)", strings.Join(parts, "/"))
	}
	fmt.Fprintln(c.main.Stdout)
	return nil
}

func slicesContainsEmpty(s []string) bool {
	for _, x := range s {
		if x == "" {
			return true
		}
	}
	return false
}

func (c *VolumesCommand) ls(ctx context.Context, cl *client.Client, arg string) error {
	tw := tabwriter.NewWriter(c.main.Stdout, 0, 4, 2, ' ', 0)
	if strings.HasPrefix(arg, "/") {
		entries, _, err := cl.ListDir(ctx, strings.TrimRight(arg, "/"))
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.IsDirectory {
				fmt.Fprintf(tw, "%s/\t-\t-\n", e.Name)
			} else {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", e.Name, humanBytes(client.FileSize(e)), time.UnixMilli(e.LastModified).UTC().Format(time.RFC3339))
			}
		}
		return tw.Flush()
	}
	parts := strings.Split(arg, ".")
	type row struct {
		fullName, owner, comment string
		created                  int64
	}
	var rows []row
	switch {
	case arg == "":
		cs, err := cl.ListCatalogs(ctx)
		if err != nil {
			return err
		}
		for _, o := range cs {
			rows = append(rows, row{o.FullName, o.Owner, o.Comment, o.CreatedAt})
		}
	case len(parts) == 1:
		ss, err := cl.ListSchemas(ctx, parts[0])
		if err != nil {
			return err
		}
		for _, o := range ss {
			rows = append(rows, row{o.FullName, o.Owner, o.Comment, o.CreatedAt})
		}
	case len(parts) == 2:
		vs, err := cl.ListVolumes(ctx, parts[0], parts[1])
		if err != nil {
			return err
		}
		for _, o := range vs {
			rows = append(rows, row{o.FullName, o.Owner, o.Comment, o.CreatedAt})
		}
	default:
		return fmt.Errorf("ls takes a catalog, CATALOG.SCHEMA or a /Volumes path, got %q", arg)
	}
	fmt.Fprintln(tw, "NAME\tOWNER\tCREATED\tCOMMENT")
	for _, o := range rows {
		fmt.Fprintf(tw, "%v\t%v\t%s\t%s\n", o.fullName, o.owner, time.UnixMilli(o.created).UTC().Format(time.RFC3339), o.comment)
	}
	return tw.Flush()
}

type cpOptions struct {
	recursive bool
	jobs      int
	overwrite bool
	progress  bool
}

func (c *VolumesCommand) cp(ctx context.Context, cl *client.Client, src, dst string, o cpOptions) error {
	plan, err := cl.PlanCopy(ctx, src, dst, o.recursive)
	if err != nil {
		return err
	}
	return c.run(ctx, cl, plan, o)
}

// run carries out the plan with o.jobs workers, showing progress.
func (c *VolumesCommand) run(ctx context.Context, cl *client.Client, plan *client.CopyPlan, o cpOptions) error {
	var total int64
	for _, t := range plan.Files {
		total += t.Size
	}
	var done, files atomic.Int64
	start := time.Now()
	stop := make(chan struct{})
	var pw sync.WaitGroup
	if o.progress {
		pw.Go(func() {
			tick := time.NewTicker(200 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					c.printProgress(done.Load(), total, files.Load(), len(plan.Files), start, false)
				}
			}
		})
	}
	err := cl.Copy(ctx, plan, client.CopyOptions{
		Jobs: o.jobs, Overwrite: o.overwrite,
		Progress: func(n int64) { done.Add(n) },
		FileDone: func() { files.Add(1) },
	})
	close(stop)
	pw.Wait()
	if o.progress {
		c.printProgress(done.Load(), total, files.Load(), len(plan.Files), start, true)
	}
	if err != nil {
		return err
	}
	el := time.Since(start).Seconds()
	fmt.Fprintf(c.main.Stdout, "copied %d file(s), %s in %.1fs (%s/s)\n", files.Load(), humanBytes(total), el, humanBytes(int64(float64(total)/max(el, 1e-3))))
	return nil
}

func (c *VolumesCommand) printProgress(done, total, files int64, n int, start time.Time, final bool) {
	pct := 100.0
	if total > 0 {
		pct = 100 * float64(done) / float64(total)
	}
	const width = 30
	bar := strings.Repeat("#", int(pct/100*width)) + strings.Repeat(".", width-int(pct/100*width))
	rate := float64(done) / max(time.Since(start).Seconds(), 1e-3)
	end := ""
	if final {
		end = "\n"
	}
	fmt.Fprintf(c.main.Stderr, "\r[%s] %5.1f%%  %s / %s  %s/s  %d/%d files%s", bar, pct, humanBytes(done), humanBytes(total), humanBytes(int64(rate)), files, n, end)
}

func (c *VolumesCommand) rm(ctx context.Context, cl *client.Client, target string, recursive, force bool) error {
	out := c.main.Stdout
	if !strings.HasPrefix(target, "/") {
		parts := strings.Split(target, ".")
		kind := map[int]string{1: "catalogs", 2: "schemas", 3: "volumes"}[len(parts)]
		if kind == "" || slicesContainsEmpty(parts) {
			return fmt.Errorf("%q is neither a /Volumes path nor CATALOG[.SCHEMA[.VOLUME]]", target)
		}
		if err := cl.DeleteCatalogObject(ctx, kind, target, force && kind != "volumes"); err != nil {
			return err
		}
		fmt.Fprintf(out, "deleted %s %s\n", strings.TrimSuffix(kind, "s"), target)
		return nil
	}
	target = strings.TrimRight(target, "/")
	err := cl.DeleteFile(ctx, target)
	if err == nil {
		fmt.Fprintf(out, "deleted %s\n", target)
		return nil
	}
	// Not a file: a directory?
	if !errs.Is(err, errs.NotFound) && !errs.Is(err, errs.Invalid) {
		return err
	}
	if ok, derr := cl.IsDir(ctx, target); derr != nil || !ok {
		return err
	}
	if !recursive {
		if err := cl.DeleteDir(ctx, target); err != nil {
			if isConflict(err) {
				return fmt.Errorf("%w (sextant volumes rm -r deletes it with all it holds)", err)
			}
			return err
		}
		fmt.Fprintf(out, "deleted %s/\n", target)
		return nil
	}
	n, err := cl.DeleteTree(ctx, target, 8, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "deleted %s/ (%d file(s))\n", target, n)
	return nil
}

// humanBytes formats a byte count with a binary unit.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for v := n / unit; v >= unit && exp < 4; v /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// isConflict reports whether err is a 409: what exists already, or a
// directory that is not empty.
func isConflict(err error) bool {
	return errs.Is(err, errs.AlreadyExists) || errs.Is(err, errs.Conflict)
}
