package launcher

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sextant/sextant/internal/runevents"
	"github.com/sextant/sextant/internal/runlogs"
	"github.com/sextant/sextant/internal/tracking"
)

// Hang detection (docs/run.md, "Hangs"). The launcher makes an agent
// directory (SEXTANT_AGENT_DIR) and puts a sitecustomize.py in it, first
// on the job's PYTHONPATH: each Python process of the job then registers
// faulthandler for SIGUSR2 (its stacks go to <pid>.stacks) and writes
// <pid>.proc (who it is). Ranks using sextant.progress touch <pid>.hb when
// they step. A rank whose heartbeat is older than HangAfter is hung; a job
// without heartbeats is hung when it printed nothing and logged no metric
// for HangAfter. The launcher then collects every rank's stacks into the
// run's log, opens a KindHung span and sets the run's alert tag; the span
// closes when the ranks move again or the job ends.

//go:embed sitecustomize.py
var sitecustomizePy []byte

// EnvAgentDir names the job's agent directory (see Options.HangAfter).
const EnvAgentDir = "SEXTANT_AGENT_DIR"

// hangStackPrefix starts each log line of a rank's collected stacks.
const hangStackPrefix = "[sextant hang]"

// TagDeleter deletes a run tag; internal/client implements it. The
// launcher uses it, when its Tracker has it, to clear the alert tag when
// a hung span closes.
type TagDeleter interface {
	DeleteTag(ctx context.Context, runID, key string) error
}

// makeAgentDir creates the agent directory with the sitecustomize that
// registers the job's Python processes; "" when hang detection is off or
// the directory cannot be made (said once).
func (l *launcher) makeAgentDir() string {
	if l.opts.HangAfter <= 0 {
		return ""
	}
	d, err := os.MkdirTemp(l.opts.SpoolDir, "sextant-agent-")
	if err == nil {
		err = os.WriteFile(filepath.Join(d, "sitecustomize.py"), sitecustomizePy, 0o600)
	}
	if err != nil {
		l.say("hang detection is off: %v", err)
		if d != "" {
			_ = os.RemoveAll(d)
		}
		return ""
	}
	return d
}

// procInfo is a <pid>.proc file: a Python process of the job that can be
// asked for its stacks.
type procInfo struct {
	PID        int      `json:"pid"`
	Rank       *string  `json:"rank"`
	LocalRank  *string  `json:"local_rank"`
	WorldSize  *string  `json:"world_size"`
	Host       string   `json:"host"`
	Argv       []string `json:"argv"`
	MainThread string   `json:"main_thread"`
}

func atoiOr(s *string, def int) int {
	if s == nil {
		return def
	}
	if n, err := strconv.Atoi(*s); err == nil {
		return n
	}
	return def
}

// rank is the process's global rank; -1 when it has none (torchrun's
// agent, a helper process).
func (p *procInfo) rank() int { return atoiOr(p.Rank, -1) }

// readProcs reads the agent directory's registered processes that are
// still in the job's process group, ranks first, by rank.
func readProcs(dir string, alive func(pid int) bool) []procInfo {
	names, _ := filepath.Glob(filepath.Join(dir, "*.proc"))
	var out []procInfo
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			continue
		}
		var p procInfo
		if json.Unmarshal(b, &p) != nil || p.PID <= 0 || !alive(p.PID) {
			continue
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		ri, rj := out[i].rank(), out[j].rank()
		if (ri < 0) != (rj < 0) {
			return ri >= 0
		}
		if ri != rj {
			return ri < rj
		}
		return out[i].PID < out[j].PID
	})
	return out
}

// beat is a rank's newest heartbeat.
type beat struct {
	rank int
	at   time.Time
}

// readBeats returns the heartbeats of the processes in procs.
func readBeats(dir string, procs []procInfo) []beat {
	var out []beat
	for i := range procs {
		st, err := os.Stat(filepath.Join(dir, strconv.Itoa(procs[i].PID)+".hb"))
		if err != nil {
			continue
		}
		out = append(out, beat{rank: procs[i].rank(), at: st.ModTime()})
	}
	return out
}

// hangDetector decides when a job is hung, from what the launcher sees at
// each look. It is for one goroutine.
type hangDetector struct {
	after time.Duration
	// outN is the job's output byte count at outAt, when it last grew.
	outN  int64
	outAt time.Time
}

// hangVerdict is what one look found.
type hangVerdict struct {
	hung bool
	// ranks are the ranks whose heartbeat is stale; empty when the job is
	// judged on its output and metrics (no rank has a heartbeat).
	ranks []int
	// since is the last sign of life of the hung ranks (or job).
	since time.Time
}

// look judges the job at now: beats are the ranks' heartbeats (empty when
// no rank uses the progress API), output the bytes the job has written so
// far, and lastMetric returns the time of the run's newest metric (zero
// when none or unknown); it is called only when the job is silent.
func (d *hangDetector) look(now time.Time, beats []beat, output int64, lastMetric func() time.Time) hangVerdict {
	if output != d.outN {
		d.outN, d.outAt = output, now
	}
	if len(beats) > 0 {
		var v hangVerdict
		for _, b := range beats {
			if now.Sub(b.at) >= d.after {
				v.ranks = append(v.ranks, b.rank)
				if v.since.IsZero() || b.at.Before(v.since) {
					v.since = b.at
				}
			}
		}
		sort.Ints(v.ranks)
		v.hung = len(v.ranks) > 0
		return v
	}
	if now.Sub(d.outAt) < d.after {
		return hangVerdict{}
	}
	last := d.outAt
	if m := lastMetric(); m.After(last) {
		last = m
	}
	return hangVerdict{hung: now.Sub(last) >= d.after, since: last}
}

// frame is one line of a faulthandler stack: "File "x.py", line 42 in f".
type frame struct {
	File string
	Line int
	Func string
}

func (f frame) String() string {
	return fmt.Sprintf("%s (%s:%d)", f.Func, filepath.Base(f.File), f.Line)
}

// innermostFrame returns the most recent frame of the thread mainThread
// ("0x00007f..." as faulthandler prints it) in a faulthandler dump of all
// threads; with no such thread, the last thread's (the oldest: the main
// thread, as CPython lists them). ok is false when the dump has no frame.
func innermostFrame(dump, mainThread string) (f frame, ok bool) {
	var threads []struct {
		id    string
		first *frame
	}
	sc := bufio.NewScanner(strings.NewReader(dump))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "Current thread "); ok {
			line = "Thread " + rest
		}
		if rest, ok := strings.CutPrefix(line, "Thread "); ok {
			id, _, _ := strings.Cut(rest, " ")
			threads = append(threads, struct {
				id    string
				first *frame
			}{id: id})
			continue
		}
		if len(threads) == 0 && strings.HasPrefix(line, "Stack (most recent call first)") {
			threads = append(threads, struct {
				id    string
				first *frame
			}{})
			continue
		}
		fr, ok := parseFrame(line)
		if !ok || len(threads) == 0 || threads[len(threads)-1].first != nil {
			continue
		}
		threads[len(threads)-1].first = &fr
	}
	for _, t := range threads {
		if mainThread != "" && strings.EqualFold(t.id, mainThread) && t.first != nil {
			return *t.first, true
		}
	}
	if n := len(threads); n > 0 && threads[n-1].first != nil {
		return *threads[n-1].first, true
	}
	return frame{}, false
}

// parseFrame reads `File "/x/train.py", line 42 in all_reduce`.
func parseFrame(line string) (frame, bool) {
	rest, ok := strings.CutPrefix(line, `File "`)
	if !ok {
		return frame{}, false
	}
	file, rest, ok := strings.Cut(rest, `", line `)
	if !ok {
		return frame{}, false
	}
	num, fn, ok := strings.Cut(rest, " in ")
	if !ok {
		return frame{}, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil {
		return frame{}, false
	}
	return frame{File: file, Line: n, Func: strings.TrimSpace(fn)}, true
}

// rankStacks is one process's collected stacks.
type rankStacks struct {
	proc  procInfo
	dump  string
	frame frame
	ok    bool
}

// collectStacks asks every registered process of the job for its stacks
// (SIGUSR2) and waits, for at most timeout, for each dump to be written
// in full.
func collectStacks(dir string, procs []procInfo, signal func(pid int) error, timeout time.Duration) []rankStacks {
	before := make([]int64, len(procs))
	asked := make([]bool, len(procs))
	path := func(i int) string { return filepath.Join(dir, strconv.Itoa(procs[i].PID)+".stacks") }
	size := func(i int) int64 {
		st, err := os.Stat(path(i))
		if err != nil {
			return 0
		}
		return st.Size()
	}
	for i := range procs {
		before[i] = size(i)
		asked[i] = signal(procs[i].PID) == nil
	}
	// A dump is complete once it has grown and then stopped growing.
	last := make([]int64, len(procs))
	copy(last, before)
	settled := make([]bool, len(procs))
	deadline := time.Now().Add(timeout)
	for {
		time.Sleep(50 * time.Millisecond)
		all := true
		for i := range procs {
			if !asked[i] || settled[i] {
				continue
			}
			n := size(i)
			if n > before[i] && n == last[i] {
				settled[i] = true
				continue
			}
			last[i] = n
			all = false
		}
		if all || time.Now().After(deadline) {
			break
		}
	}
	out := make([]rankStacks, 0, len(procs))
	for i := range procs {
		rs := rankStacks{proc: procs[i]}
		if asked[i] {
			if f, err := os.Open(path(i)); err == nil {
				b := make([]byte, max(0, last[i]-before[i]))
				n, _ := f.ReadAt(b, before[i])
				_ = f.Close()
				rs.dump = string(bytes.TrimRight(b[:n], "\n"))
			}
		}
		rs.frame, rs.ok = innermostFrame(rs.dump, procs[i].MainThread)
		out = append(out, rs)
	}
	return out
}

// hangWatch watches the job for hangs until stop is closed; see the
// comment at the top of this file.
type hangWatch struct {
	l       *launcher
	ch      *child
	dir     string
	q       *queue
	output  func() int64
	det     hangDetector
	node    string
	openKey string
	openEv  runevents.Event
	openMsg string
	hungSet string
	// frGen numbers the requests for Flight Recorder dumps.
	frGen int
}

// startHangWatch starts watching the job; the function returned stops it
// and closes a hung span still open (the job ended).
func (l *launcher) startHangWatch(ctx context.Context, ch *child, cs *captures, q *queue) (stop func()) {
	if l.agentDir == "" {
		return func() {}
	}
	w := &hangWatch{
		l: l, ch: ch, dir: l.agentDir, q: q, node: hostname(),
		output: func() int64 { return cs.caps[0].read.Load() + cs.caps[1].read.Load() },
		det:    hangDetector{after: l.opts.HangAfter, outAt: l.now()},
	}
	every := min(max(l.opts.HangAfter/5, time.Second), 5*time.Second)
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				w.tick(ctx)
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
		if w.openKey != "" {
			w.closeSpan(ctx, w.openMsg+" (until the job ended)")
		}
	}
}

func (w *hangWatch) tick(ctx context.Context) {
	now := w.l.now()
	procs := readProcs(w.dir, w.ch.inGroup)
	v := w.det.look(now, readBeats(w.dir, procs), w.output(), func() time.Time { return w.lastMetric(ctx) })
	if !v.hung {
		if w.openKey != "" {
			w.closeSpan(ctx, w.openMsg+" (it moved again)")
		}
		return
	}
	key := fmt.Sprint(v.ranks)
	if w.openKey != "" && key == w.hungSet {
		return
	}
	if w.openKey != "" {
		w.closeSpan(ctx, w.openMsg)
	}
	w.hungSet = key
	w.report(ctx, now, v, procs)
}

// lastMetric is the time of the run's newest metric, other than the
// launcher's (system/) and the progress API's (sextant/progress/); zero
// when there is none or the server cannot say.
func (w *hangWatch) lastMetric(ctx context.Context) time.Time {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := w.l.opts.Tracker.GetRun(cctx, w.l.run.Info.RunID)
	if err != nil || r == nil {
		return time.Time{}
	}
	var last int64
	for _, m := range r.Data.Metrics {
		if strings.HasPrefix(m.Key, "system/") || strings.HasPrefix(m.Key, "sextant/progress/") {
			continue
		}
		last = max(last, m.TimestampMs)
	}
	if last == 0 {
		return time.Time{}
	}
	return time.UnixMilli(last)
}

// report collects the stacks and the Flight Recorder dumps, keeps them
// with the run (its log, its artifacts) and opens the hung span.
func (w *hangWatch) report(ctx context.Context, now time.Time, v hangVerdict, procs []procInfo) {
	l := w.l
	t0 := time.Now()
	// The dumps are asked for first: the processes' agent threads write
	// them while the stacks are collected.
	w.frGen++
	frAsked := askFlightRecorder(w.dir, w.frGen)
	stacks := collectStacks(w.dir, procs, func(pid int) error { return w.ch.signalMember(pid, syscall.SIGUSR2) }, 5*time.Second)
	took := time.Since(t0)
	var frs []frDump
	if frAsked == nil {
		frs = collectFlightRecorder(w.dir, w.frGen, procs, t0.Add(frWait))
	} else {
		l.say("could not ask for Flight Recorder dumps: %v", frAsked)
	}
	frTook := time.Since(t0)
	silent := now.Sub(v.since).Round(time.Second)
	hung := map[int]bool{}
	for _, r := range v.ranks {
		hung[r] = true
	}
	var parts, ranks, frames []string
	for _, s := range stacks {
		r := s.proc.rank()
		if len(v.ranks) > 0 && !hung[r] {
			continue
		}
		who := fmt.Sprintf("rank %d", r)
		if r < 0 { // a job without ranks (judged on its output): name the process
			who = fmt.Sprintf("pid %d", s.proc.PID)
		} else {
			ranks = append(ranks, strconv.Itoa(r))
		}
		where := "stacks not collected"
		if s.ok {
			where = "blocked in " + s.frame.String()
			frames = append(frames, who+": "+s.frame.String())
		}
		parts = append(parts, who+": "+where)
	}
	var msg string
	if len(v.ranks) > 0 {
		msg = fmt.Sprintf("rank %s on node %s: no progress for %s", joinInts(v.ranks), w.node, silent)
	} else {
		msg = fmt.Sprintf("node %s: no output and no metrics for %s", w.node, silent)
	}
	if len(parts) > 0 {
		msg += "; " + strings.Join(parts, ", ")
	}
	w.shipStacks(stacks, now)
	frDir := frArtifactDir(now)
	saved := w.keepFlightRecorder(ctx, frs, frDir, now)
	removeFlightRecorder(w.dir, w.frGen, procs)
	if saved > 0 {
		msg += "; Flight Recorder dumps in artifacts " + frDir + "/"
	}
	l.say("the job looks hung: %s; its stacks are in the run's log", msg)
	start := v.since.UnixMilli()
	w.openKey = "hung:" + w.node + ":" + strconv.FormatInt(start, 10)
	w.openMsg = msg
	ev := runevents.Event{
		Key: w.openKey, Kind: runevents.KindHung, Severity: runevents.SeverityWarning, TimeMs: start, Open: true,
		Node: w.node, GPU: -1, Step: -1, Message: msg,
		Attrs: map[string]string{
			"ranks": strings.Join(ranks, ","), "frames": strings.Join(frames, ";"),
			"hang_after_s": strconv.FormatFloat(l.opts.HangAfter.Seconds(), 'f', -1, 64),
			"stacks_ms":    strconv.FormatInt(took.Milliseconds(), 10),
			"stacks":       strconv.Itoa(len(stacks)),
			"fr_ms":        strconv.FormatInt(frTook.Milliseconds(), 10),
			"fr_dumps":     strconv.Itoa(saved),
		},
	}
	if saved > 0 {
		ev.Attrs["fr_dir"] = frDir
	}
	w.openEv = ev
	w.appendEvent(ctx, ev)
	if err := l.opts.Tracker.SetTags(ctx, l.run.Info.RunID, tracking.Tag{Key: runevents.TagAlert, Value: msg}); err != nil {
		l.say("could not set the run's alert tag: %v", err)
	}
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

// shipStacks puts each process's stacks in the run's log, each line
// prefixed with who it is from.
func (w *hangWatch) shipStacks(stacks []rankStacks, now time.Time) {
	ts := now.UnixMilli()
	node := int32(w.l.opts.Job.NodeRank)
	for _, s := range stacks {
		local := int32(atoiOr(s.proc.LocalRank, -1))
		head := w.procHead(s.proc)
		if s.dump == "" {
			w.q.push([]byte(head+" no stacks (the process did not answer SIGUSR2)"), ts, runlogs.Stderr, 0, node, local)
			continue
		}
		w.q.push([]byte(head+" stacks, most recent call first"), ts, runlogs.Stderr, 0, node, local)
		for _, line := range strings.Split(s.dump, "\n") {
			w.q.push([]byte(head+" "+line), ts, runlogs.Stderr, 0, node, local)
		}
	}
}

// procHead starts each log line about process p.
func (w *hangWatch) procHead(p procInfo) string {
	if p.rank() < 0 {
		return fmt.Sprintf("%s process %d (%s) node %s:", hangStackPrefix, p.PID, strings.Join(p.Argv, " "), w.node)
	}
	return fmt.Sprintf("%s rank %d pid %d node %s:", hangStackPrefix, p.rank(), p.PID, w.node)
}

func (w *hangWatch) appendEvent(ctx context.Context, ev runevents.Event) {
	if w.l.opts.Events == nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := w.l.opts.Events.AppendEvents(cctx, w.l.run.Info.RunID, []runevents.Event{ev}); err != nil {
		w.l.say("could not record the hang on the run: %v", err)
	}
}

// closeSpan closes the open hung span with msg and clears the alert tag.
func (w *hangWatch) closeSpan(ctx context.Context, msg string) {
	l := w.l
	ev := w.openEv
	ev.Open, ev.EndMs, ev.Message = false, max(l.now().UnixMilli(), ev.TimeMs), msg
	w.appendEvent(ctx, ev)
	// The tag stays while another alerting span is open (the watcher's
	// stalled span, another node's hang), holding that span's message.
	var still string
	if l.opts.Events != nil {
		// Bounded like appendEvent: a server that accepts but never answers
		// must not hold the hang watch (and the job's exit) up.
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		p, err := l.opts.Events.ListEvents(lctx, runevents.Query{RunID: l.run.Info.RunID, Kinds: runevents.AlertKinds, OpenOnly: true})
		cancel()
		if err != nil {
			l.say("could not list the run's open alerts: %v", err)
		}
		still = runevents.AlertAfterClose(p.Events)
	}
	if still != "" {
		if err := l.opts.Tracker.SetTags(ctx, l.run.Info.RunID, tracking.Tag{Key: runevents.TagAlert, Value: still}); err != nil {
			l.say("could not set the run's alert tag: %v", err)
		}
	} else if td, ok := l.opts.Tracker.(TagDeleter); ok {
		if err := td.DeleteTag(ctx, l.run.Info.RunID, runevents.TagAlert); err != nil {
			l.say("could not clear the run's alert tag: %v", err)
		}
	}
	w.openKey, w.hungSet = "", ""
}
