package launcher

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sextant/sextant/internal/runlogs"
)

// Flight Recorder dumps on a hang (docs/run.md, "Hangs"). Before it
// signals the ranks for their stacks, the launcher replaces <dir>/dump
// with a new generation number; each process's agent thread (see
// sitecustomize.py) then writes <pid>.<gen>.fr, torch's Flight Recorder
// dump when torch.distributed is initialized, and <pid>.<gen>.frdone, a
// JSON object saying what it wrote or why it wrote nothing. The launcher
// waits a bounded time for the .frdone files, uploads each dump as a run
// artifact and says in the run's log, for every rank, where its dump is
// or why there is none. The generation keeps a late answer to one hang
// from passing for the answer to the next.

// ArtifactPutter stores one artifact of a run; internal/client implements
// it. The launcher keeps Flight Recorder dumps with the run when its
// Tracker has it.
type ArtifactPutter interface {
	// PutRunArtifact stores size bytes of body at path (relative, "/"
	// separated) under the run's artifact URI.
	PutRunArtifact(ctx context.Context, artifactURI, path string, body io.ReadSeeker, size int64) error
}

// frWait bounds the wait for the processes' Flight Recorder dumps,
// counted from the request, which goes out before the stacks are asked
// for: the two waits overlap.
const frWait = 5 * time.Second

// askFlightRecorder asks the job's processes for Flight Recorder dumps of
// generation gen. The file is replaced, not rewritten, so that a process
// never reads half a number.
func askFlightRecorder(dir string, gen int) error {
	tmp := filepath.Join(dir, "dump.tmp")
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(gen)+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "dump"))
}

// frDump is one process's answer to a request for a Flight Recorder dump.
type frDump struct {
	proc procInfo
	// file is the dump's path in the agent directory; "" when there is no
	// dump, and why says why.
	file string
	// format is "json" or "pickle" (the torch function that made it).
	format  string
	entries int
	why     string
}

// frDone is a <pid>.<gen>.frdone file.
type frDone struct {
	Format  string `json:"format"`
	Entries int    `json:"entries"`
	Error   string `json:"error"`
}

// collectFlightRecorder waits until deadline for each process's answer to
// request gen and returns one frDump per process, in procs' order.
func collectFlightRecorder(dir string, gen int, procs []procInfo, deadline time.Time) []frDump {
	out := make([]frDump, len(procs))
	base := func(i int) string {
		return filepath.Join(dir, strconv.Itoa(procs[i].PID)+"."+strconv.Itoa(gen))
	}
	pending := len(procs)
	answered := make([]bool, len(procs))
	for {
		for i := range procs {
			if answered[i] {
				continue
			}
			b, err := os.ReadFile(base(i) + ".frdone")
			if err != nil {
				continue
			}
			answered[i] = true
			pending--
			d := frDump{proc: procs[i]}
			var done frDone
			switch {
			case json.Unmarshal(b, &done) != nil:
				d.why = "unreadable answer from the process"
			case done.Error != "":
				d.why = done.Error
			case done.Format != "json" && done.Format != "pickle":
				d.why = fmt.Sprintf("unknown dump format %q", done.Format)
			default:
				if _, err := os.Stat(base(i) + ".fr"); err != nil {
					d.why = "the dump file is missing"
					break
				}
				d.file, d.format, d.entries = base(i)+".fr", done.Format, done.Entries
			}
			out[i] = d
		}
		if pending == 0 || !time.Now().Before(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i := range procs {
		if !answered[i] {
			out[i] = frDump{proc: procs[i], why: "no answer within " + frWait.String() + " (the process may hold Python's GIL)"}
		}
	}
	return out
}

// removeFlightRecorder deletes request gen's files, uploaded or not.
func removeFlightRecorder(dir string, gen int, procs []procInfo) {
	for _, p := range procs {
		base := filepath.Join(dir, strconv.Itoa(p.PID)+"."+strconv.Itoa(gen))
		_ = os.Remove(base + ".fr")
		_ = os.Remove(base + ".frdone")
	}
}

// frArtifactDir is the run's artifact folder for the dumps of a hang
// found at t.
func frArtifactDir(t time.Time) string {
	return "sextant/hang/" + t.UTC().Format("20060102T150405Z")
}

// frArtifactName is a dump's file name in that folder; taken holds the
// names given so far: a second dump of one rank (two processes with the
// same RANK, each with a process group) is told apart by its pid.
func frArtifactName(d frDump, taken map[string]bool) string {
	ext := ".json"
	if d.format == "pickle" {
		ext = ".pkl"
	}
	name := "flight_recorder_pid" + strconv.Itoa(d.proc.PID)
	if r := d.proc.rank(); r >= 0 {
		name = "flight_recorder_rank" + strconv.Itoa(r)
		if taken[name+ext] {
			name += "_pid" + strconv.Itoa(d.proc.PID)
		}
	}
	taken[name+ext] = true
	return name + ext
}

// keepFlightRecorder uploads the dumps into the run's artifact folder dir
// and says in the run's log, for each rank, where its dump went or why
// there is none. Processes without a rank (torchrun's agent), and those
// of a rank whose other process had a dump (DataLoader workers started
// with spawn inherit RANK), are named only when they had a dump. It
// returns how many dumps were saved. A failed upload is said and
// skipped: the hang is reported all the same.
func (w *hangWatch) keepFlightRecorder(ctx context.Context, dumps []frDump, dir string, now time.Time) (saved int) {
	l := w.l
	put, _ := l.opts.Tracker.(ArtifactPutter)
	ts := now.UnixMilli()
	node := int32(l.opts.Job.NodeRank)
	dumped := map[int]bool{}
	for _, d := range dumps {
		if d.file != "" {
			dumped[d.proc.rank()] = true
		}
	}
	taken := map[string]bool{}
	for _, d := range dumps {
		if d.file == "" && (d.proc.rank() < 0 || dumped[d.proc.rank()]) {
			continue
		}
		var text string
		switch {
		case d.file == "":
			text = "no Flight Recorder dump (" + d.why + ")"
		case put == nil:
			text = "Flight Recorder dump not kept (this server connection cannot store artifacts)"
		default:
			path := dir + "/" + frArtifactName(d, taken)
			if err := w.upload(ctx, put, d.file, path); err != nil {
				l.say("could not keep rank %d's Flight Recorder dump: %v", d.proc.rank(), err)
				text = fmt.Sprintf("Flight Recorder dump (%s) not kept: upload failed: %v", entries(d.entries), err)
				break
			}
			saved++
			text = fmt.Sprintf("Flight Recorder dump saved as artifact %s (%s)", path, entries(d.entries))
		}
		w.q.push([]byte(w.procHead(d.proc)+" "+text), ts, runlogs.Stderr, 0, node, int32(atoiOr(d.proc.LocalRank, -1)))
	}
	return saved
}

func (w *hangWatch) upload(ctx context.Context, put ArtifactPutter, file, path string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return put.PutRunArtifact(cctx, w.l.run.Info.ArtifactURI, path, f, st.Size())
}

func entries(n int) string {
	if n == 1 {
		return "1 entry"
	}
	return strconv.Itoa(n) + " entries"
}
