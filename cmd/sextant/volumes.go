package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"
)

// VolumesCommand manages catalogs, schemas and volumes, and copies files
// to and from volumes.
type VolumesCommand struct{ main *Main }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

const ucAPI = "/api/2.1/unity-catalog"

// volumesCommand is a leaf of `sextant volumes`: flags and --server, then
// positional arguments (flags may follow them), then do.
func volumesCommand(minArgs, maxArgs int, extra func(fs *flag.FlagSet), do func(ctx context.Context, c *VolumesCommand, cl *filesClient, args []string) error) func(ctx context.Context, m *Main, fs *flag.FlagSet, args []string) error {
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
		return do(ctx, &VolumesCommand{main: m}, m.filesClient(a), pos)
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
			}, func(ctx context.Context, c *VolumesCommand, cl *filesClient, args []string) error {
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
			run: volumesCommand(0, 1, nil, func(ctx context.Context, c *VolumesCommand, cl *filesClient, args []string) error {
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
			}, func(ctx context.Context, c *VolumesCommand, cl *filesClient, args []string) error {
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
			}, func(ctx context.Context, c *VolumesCommand, cl *filesClient, args []string) error {
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

func (c *VolumesCommand) create(ctx context.Context, cl *filesClient, name, comment string, parents bool) error {
	parts := strings.Split(name, ".")
	if len(parts) > 3 || slicesContainsEmpty(parts) {
		return fmt.Errorf("%q is not CATALOG, CATALOG.SCHEMA or CATALOG.SCHEMA.VOLUME", name)
	}
	bodies := []struct {
		target string
		body   map[string]any
	}{
		{ucAPI + "/catalogs", map[string]any{"name": parts[0]}},
	}
	if len(parts) >= 2 {
		bodies = append(bodies, struct {
			target string
			body   map[string]any
		}{ucAPI + "/schemas", map[string]any{"catalog_name": parts[0], "name": parts[1]}})
	}
	if len(parts) == 3 {
		bodies = append(bodies, struct {
			target string
			body   map[string]any
		}{ucAPI + "/volumes", map[string]any{"catalog_name": parts[0], "schema_name": parts[1], "name": parts[2], "volume_type": "MANAGED"}})
	}
	if !parents {
		bodies = bodies[len(bodies)-1:]
	}
	for i, b := range bodies {
		last := i == len(bodies)-1
		if last && comment != "" {
			b.body["comment"] = comment
		}
		err := cl.json(ctx, "POST", b.target, b.body, nil)
		if err != nil && !last && isStatus(err, http.StatusConflict) {
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

type ucObject struct {
	Name      string `json:"name"`
	FullName  string `json:"full_name"`
	Owner     string `json:"owner"`
	Comment   string `json:"comment"`
	CreatedAt int64  `json:"created_at"`
}

func (c *VolumesCommand) ls(ctx context.Context, cl *filesClient, arg string) error {
	tw := tabwriter.NewWriter(c.main.Stdout, 0, 4, 2, ' ', 0)
	if strings.HasPrefix(arg, "/") {
		entries, _, err := cl.list(ctx, strings.TrimRight(arg, "/"))
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.IsDirectory {
				fmt.Fprintf(tw, "%s/\t-\t-\n", e.Name)
			} else {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", e.Name, humanBytes(e.FileSize), time.UnixMilli(e.LastModified).UTC().Format(time.RFC3339))
			}
		}
		return tw.Flush()
	}
	parts := strings.Split(arg, ".")
	var target, key string
	switch {
	case arg == "":
		target, key = ucAPI+"/catalogs", "catalogs"
	case len(parts) == 1:
		target, key = ucAPI+"/schemas?catalog_name="+urlQueryEscape(parts[0]), "schemas"
	case len(parts) == 2:
		target, key = ucAPI+"/volumes?catalog_name="+urlQueryEscape(parts[0])+"&schema_name="+urlQueryEscape(parts[1]), "volumes"
	default:
		return fmt.Errorf("ls takes a catalog, CATALOG.SCHEMA or a /Volumes path, got %q", arg)
	}
	fmt.Fprintln(tw, "NAME\tOWNER\tCREATED\tCOMMENT")
	for tok := ""; ; {
		t := target
		if tok != "" {
			sep := "?"
			if strings.Contains(t, "?") {
				sep = "&"
			}
			t += sep + "page_token=" + urlQueryEscape(tok)
		}
		var page map[string]any
		if err := cl.json(ctx, "GET", t, nil, &page); err != nil {
			return err
		}
		items, _ := page[key].([]any)
		for _, it := range items {
			o, _ := it.(map[string]any)
			created, _ := o["created_at"].(float64)
			comment, _ := o["comment"].(string)
			fmt.Fprintf(tw, "%v\t%v\t%s\t%s\n", o["full_name"], o["owner"], time.UnixMilli(int64(created)).UTC().Format(time.RFC3339), comment)
		}
		tok, _ = page["next_page_token"].(string)
		if tok == "" {
			break
		}
	}
	return tw.Flush()
}

func isVolumePath(p string) bool { return strings.HasPrefix(p, "/Volumes/") }

type cpOptions struct {
	recursive bool
	jobs      int
	overwrite bool
	progress  bool
}

// transfer is one file to copy.
type transfer struct {
	src, dst string
	size     int64
}

func (c *VolumesCommand) cp(ctx context.Context, cl *filesClient, src, dst string, o cpOptions) error {
	up := isVolumePath(dst)
	if up == isVolumePath(src) {
		return errors.New("cp copies between the local disk and a volume: exactly one of SRC and DST must be a /Volumes path")
	}
	var plan []transfer
	var dirs []string // remote directories to create (empty ones included)
	if up {
		fi, err := os.Stat(src)
		if err != nil {
			return err
		}
		dst = strings.TrimRight(dst, "/")
		if fi.IsDir() {
			if !o.recursive {
				return fmt.Errorf("%s is a directory: use -r", src)
			}
			if ok, _ := cl.isDir(ctx, dst); ok {
				dst = dst + "/" + filepath.Base(filepath.Clean(src))
			}
			err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				rel, _ := filepath.Rel(src, p)
				remote := dst
				if rel != "." {
					remote += "/" + filepath.ToSlash(rel)
				}
				if d.IsDir() {
					dirs = append(dirs, remote)
					return nil
				}
				if !d.Type().IsRegular() {
					return nil
				}
				info, err := d.Info()
				if err != nil {
					return err
				}
				plan = append(plan, transfer{p, remote, info.Size()})
				return nil
			})
			if err != nil {
				return err
			}
		} else {
			if ok, _ := cl.isDir(ctx, dst); ok {
				dst = dst + "/" + filepath.Base(src)
			}
			plan = append(plan, transfer{src, dst, fi.Size()})
		}
	} else {
		src = strings.TrimRight(src, "/")
		size, err := cl.statFile(ctx, src)
		switch {
		case err == nil:
			if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
				dst = filepath.Join(dst, path.Base(src))
			}
			plan = append(plan, transfer{src, dst, size})
		case isStatus(err, http.StatusNotFound):
			// Not a file: a directory, or nothing at all.
			if dir, derr := cl.isDir(ctx, src); derr != nil {
				return derr
			} else if !dir {
				return fmt.Errorf("%s: no such file or directory", src)
			}
			if !o.recursive {
				return fmt.Errorf("%s is a directory: use -r", src)
			}
			files, rdirs, err := cl.walk(ctx, src)
			if err != nil {
				return err
			}
			if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
				dst = filepath.Join(dst, path.Base(src))
			}
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
			for _, d := range rdirs {
				if err := os.MkdirAll(filepath.Join(dst, filepath.FromSlash(strings.TrimPrefix(d.Path, src+"/"))), 0o755); err != nil {
					return err
				}
			}
			for _, f := range files {
				local := filepath.Join(dst, filepath.FromSlash(strings.TrimPrefix(f.Path, src+"/")))
				if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
					return err
				}
				plan = append(plan, transfer{f.Path, local, f.FileSize})
			}
		default:
			return err
		}
	}
	// Empty directories exist on a volume only when made.
	for _, d := range dirs {
		if err := cl.mkdirs(ctx, d); err != nil {
			return err
		}
	}
	return c.run(ctx, cl, plan, up, o)
}

// run transfers the plan with o.jobs workers, showing progress.
func (c *VolumesCommand) run(ctx context.Context, cl *filesClient, plan []transfer, up bool, o cpOptions) error {
	var total int64
	for _, t := range plan {
		total += t.size
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
					c.printProgress(done.Load(), total, files.Load(), len(plan), start, false)
				}
			}
		})
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan transfer)
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range min(o.jobs, max(1, len(plan))) {
		wg.Go(func() {
			for t := range work {
				var err error
				if up {
					err = cl.upload(ctx, t.src, t.dst, o.overwrite, func(n int64) { done.Add(n) })
				} else {
					err = c.downloadOne(ctx, cl, t, o.overwrite, func(n int64) { done.Add(n) })
				}
				if err != nil {
					once.Do(func() { first = fmt.Errorf("%s: %w", t.src, err); cancel() })
					continue
				}
				files.Add(1)
			}
		})
	}
	for _, t := range plan {
		select {
		case work <- t:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	close(stop)
	pw.Wait()
	if o.progress {
		c.printProgress(done.Load(), total, files.Load(), len(plan), start, true)
	}
	if first != nil {
		return first
	}
	el := time.Since(start).Seconds()
	fmt.Fprintf(c.main.Stdout, "copied %d file(s), %s in %.1fs (%s/s)\n", files.Load(), humanBytes(total), el, humanBytes(int64(float64(total)/max(el, 1e-3))))
	return nil
}

func (c *VolumesCommand) downloadOne(ctx context.Context, cl *filesClient, t transfer, overwrite bool, progress func(int64)) error {
	if !overwrite {
		if _, err := os.Stat(t.dst); err == nil {
			return fmt.Errorf("%s exists (--overwrite=false)", t.dst)
		}
	}
	return cl.download(ctx, t.src, t.dst, progress)
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

func (c *VolumesCommand) rm(ctx context.Context, cl *filesClient, target string, recursive, force bool) error {
	out := c.main.Stdout
	if !strings.HasPrefix(target, "/") {
		parts := strings.Split(target, ".")
		kind := map[int]string{1: "catalogs", 2: "schemas", 3: "volumes"}[len(parts)]
		if kind == "" || slicesContainsEmpty(parts) {
			return fmt.Errorf("%q is neither a /Volumes path nor CATALOG[.SCHEMA[.VOLUME]]", target)
		}
		q := ""
		if force && kind != "volumes" {
			q = "?force=true"
		}
		if err := cl.json(ctx, "DELETE", ucAPI+"/"+kind+"/"+urlQueryEscape(target)+q, nil, nil); err != nil {
			return err
		}
		fmt.Fprintf(out, "deleted %s %s\n", strings.TrimSuffix(kind, "s"), target)
		return nil
	}
	target = strings.TrimRight(target, "/")
	err := cl.deleteFile(ctx, target)
	if err == nil {
		fmt.Fprintf(out, "deleted %s\n", target)
		return nil
	}
	// Not a file: a directory?
	if !isStatus(err, http.StatusNotFound) && !isStatus(err, http.StatusBadRequest) {
		return err
	}
	if ok, derr := cl.isDir(ctx, target); derr != nil || !ok {
		return err
	}
	if !recursive {
		if err := cl.deleteDir(ctx, target); err != nil {
			if isStatus(err, http.StatusConflict) {
				return fmt.Errorf("%w (sextant volumes rm -r deletes it with all it holds)", err)
			}
			return err
		}
		fmt.Fprintf(out, "deleted %s/\n", target)
		return nil
	}
	n, err := deleteTree(ctx, cl, target, 8, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "deleted %s/ (%d file(s))\n", target, n)
	return nil
}

// deleteTree deletes a directory and everything in it: the files named
// first (a checkpoint's .metadata, so that it stops being complete at
// once), then the other files in parallel, then the directories deepest
// first. It returns the number of files deleted.
func deleteTree(ctx context.Context, cl *filesClient, dir string, jobs int, first []string) (int, error) {
	files, dirs, err := cl.walk(ctx, dir)
	if err != nil {
		return 0, err
	}
	sort.SliceStable(files, func(i, j int) bool { return contains(first, files[i].Name) && !contains(first, files[j].Name) })
	var rest []volEntry
	for _, f := range files {
		if contains(first, f.Name) && path.Dir(f.Path) == dir {
			if err := cl.deleteFile(ctx, f.Path); err != nil && !isStatus(err, http.StatusNotFound) {
				return 0, err
			}
			continue
		}
		rest = append(rest, f)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	work := make(chan string)
	for range jobs {
		wg.Go(func() {
			for p := range work {
				if err := cl.deleteFile(ctx, p); err != nil && !isStatus(err, http.StatusNotFound) {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for _, f := range rest {
		work <- f.Path
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	if strings.Count(dir, "/") > 4 { // not a volume's root, which stays
		dirs = append(dirs, volEntry{Path: dir})
	}
	for _, d := range dirs {
		if err := cl.deleteDir(ctx, d.Path); err != nil && !isStatus(err, http.StatusNotFound) {
			return 0, err
		}
	}
	return len(files), nil
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
