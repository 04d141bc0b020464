// Package goodput computes a training run's throughput, model FLOPs
// utilization (MFU) and goodput from what the run recorded: its attempts
// (runevents.KindAttempt, from `sextant run`), checkpoint saves, idle and
// hung spans, and the per-rank progress reports (internal/progress).
//
// Goodput is the share of the run's wall time spent in productive steps.
// The wall time is cut into categories, each instant counted once, in this
// order of precedence (the first that covers an instant takes it):
//
//	checkpoint  training blocked by a checkpoint save
//	lost        steps of a failed attempt after its last complete checkpoint
//	data_wait   the part of a step spent waiting for data
//	productive  the rest of the steps
//	startup     an attempt's start to the start of its first step
//	hung        hung spans (HungKinds)
//	idle        idle-GPU spans
//	other       the rest
//
// so the categories sum to the wall time. Steps are those of one reference
// rank (the lowest that reported), as ranks step together. docs/run.md
// states the definitions for users.
//
// The package imports no HTTP or SQL package: internal/httpapi reads the
// run's events and progress and serves the result.
package goodput

import (
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/sextant/sextant/internal/gpuhours"
	"github.com/sextant/sextant/internal/runevents"
)

// Run params a job sets (the Python Progress sets them from its
// arguments) to give what MFU needs.
const (
	// ParamFLOPsPerSample is the model FLOPs of one sample (forward and
	// backward).
	ParamFLOPsPerSample = "sextant.flops_per_sample"
	// ParamFLOPsPerToken is the model FLOPs of one token.
	ParamFLOPsPerToken = "sextant.flops_per_token"
	// ParamDType is the data type the model computes in (bf16, fp16, tf32,
	// fp32, fp8, fp64); DefaultDType when not set.
	ParamDType = "sextant.dtype"
	// ParamPeakTFLOPS is the peak TFLOPS of one device; it wins over the
	// table.
	ParamPeakTFLOPS = "sextant.peak_tflops"
)

// HungKinds are the span kinds whose time counts as hung.
var HungKinds = []runevents.Kind{runevents.KindStalled, runevents.KindHung}

// RecentWindowMs is the window of the recent throughput: the steps that
// ended within it before each rank's last step.
const RecentWindowMs = 60_000

// MaxSeriesPoints caps the points of Report.Series.
const MaxSeriesPoints = 500

// Step is one progress report of one rank. Optional values are negative
// when not reported.
type Step struct {
	Rank int
	Step int64
	// EndMs is when the step ended, in Unix milliseconds.
	EndMs int64
	// StepTimeS is the step's wall time in seconds, data wait included.
	StepTimeS float64
	// DataWaitS, Samples and Tokens are negative when not reported.
	DataWaitS, Samples, Tokens float64
}

// Input is what Compute needs of a run.
type Input struct {
	// Running is true while the run's status is RUNNING.
	Running bool
	// StartMs and EndMs are the run's start and end (0: none); they
	// bound the wall time of a run that has no attempts.
	StartMs, EndMs int64
	// NowMs is the present, where open spans end.
	NowMs int64
	// Events are the run's events; attempts, checkpoint saves, idle and
	// HungKinds spans are used, the others ignored.
	Events []runevents.Event
	// Steps are the progress reports of every rank, in any order.
	Steps []Step
	// Params are the run's params (only the sextant.* ones above are read).
	Params map[string]string
	// Peaks is the peak table; nil means the built-in one.
	Peaks *Peaks
}

// Breakdown is the wall time by category, in seconds.
type Breakdown struct {
	Wall, Productive, DataWait, Checkpoint, Lost, Hung, Idle, Startup, Other float64
}

// Throughput is samples and tokens per second; negative where not
// reported.
type Throughput struct {
	SamplesPerS, TokensPerS float64
}

// RankThroughput is one rank's throughput.
type RankThroughput struct {
	Rank int
	Throughput
	Steps int
}

// MFU is the model FLOPs utilization and what it was computed from.
type MFU struct {
	// Value is achieved FLOP/s over Devices × PeakTFLOPS; Known is false
	// when it could not be computed, and Reason says why.
	Value  float64
	Known  bool
	Reason string
	// FLOPsPer is the FLOPs of one sample or token (Per says which);
	// 0 when not given.
	FLOPsPer float64
	Per      string
	// AchievedFLOPS is the run's FLOP/s.
	AchievedFLOPS float64
	// Devices is the number of ranks that reported progress.
	Devices int
	// PeakTFLOPS is one device's peak; PeakSource says where it came from
	// ("param sextant.peak_tflops", "table: h100 80gb hbm3").
	PeakTFLOPS float64
	PeakSource string
	// Model and DType are the GPU model (from the attempts) and the data
	// type used.
	Model, DType string
}

// Point is the cumulative goodput at a reference step's end.
type Point struct {
	TimeMs  int64
	Step    int64
	Goodput float64
}

// Report is what Compute returns.
type Report struct {
	Breakdown Breakdown
	// Goodput is Productive / Wall; Known is false when Wall is 0.
	Goodput float64
	Known   bool
	// ReferenceRank is the rank whose steps measure time; -1 when no
	// rank reported.
	ReferenceRank int
	// Throughput is the run's (the sum over ranks), Recent the same over
	// each rank's last RecentWindowMs of steps.
	Throughput, Recent Throughput
	Ranks              []RankThroughput
	MFU                MFU
	// Series is the cumulative goodput at reference step ends, at most
	// MaxSeriesPoints (evenly thinned, the last kept).
	Series []Point
	// Attempts are the attempts' spans as counted (open ones closed).
	Attempts []gpuhours.Attempt
}

// Categories, in precedence order (lowest index wins an instant).
const (
	catCheckpoint = iota
	catLost
	catDataWait
	catProductive
	catStartup
	catHung
	catIdle
	catWall // inside an attempt: "other" when nothing above covers it
	numCats
)

type edge struct {
	at    int64 // microseconds
	cat   int
	delta int
}

// us converts milliseconds to microseconds, the sweep's unit (step times
// are seconds with sub-millisecond parts).
func us(ms int64) int64 { return ms * 1000 }

// Compute returns the run's report.
func Compute(in Input) Report {
	rep := Report{ReferenceRank: -1}
	atts := attempts(in)
	rep.Attempts = atts

	byRank := map[int][]Step{}
	for _, s := range in.Steps {
		if s.StepTimeS < 0 || math.IsNaN(s.StepTimeS) {
			continue
		}
		byRank[s.Rank] = append(byRank[s.Rank], s)
	}
	ranks := make([]int, 0, len(byRank))
	for r := range byRank {
		ranks = append(ranks, r)
	}
	sort.Ints(ranks)
	for _, r := range ranks {
		ss := byRank[r]
		sort.SliceStable(ss, func(i, j int) bool { return ss[i].EndMs < ss[j].EndMs })
	}
	rep.Throughput, rep.Recent, rep.Ranks = throughput(ranks, byRank)
	var ref []Step
	if len(ranks) > 0 {
		rep.ReferenceRank = ranks[0]
		ref = byRank[ranks[0]]
	}
	rep.Breakdown, rep.Series = breakdown(in, atts, ref)
	if rep.Breakdown.Wall > 0 {
		rep.Goodput, rep.Known = rep.Breakdown.Productive/rep.Breakdown.Wall, true
	}
	rep.MFU = mfu(in, atts, rep.Throughput, len(ranks))
	return rep
}

// attempts returns the run's attempts with their ends, as gpuhours counts
// them; a run with none gets one from its start to its end (or now).
func attempts(in Input) []gpuhours.Attempt {
	u := gpuhours.Compute(gpuhours.Run{Running: in.Running, EndMs: in.EndMs, Attempts: in.Events}, nil, in.NowMs)
	if len(u.Attempts) > 0 {
		return u.Attempts
	}
	if in.StartMs <= 0 {
		return nil
	}
	end := in.EndMs
	if end <= 0 || in.Running {
		end = in.NowMs
	}
	if end < in.StartMs {
		end = in.StartMs
	}
	return []gpuhours.Attempt{{StartMs: in.StartMs, EndMs: end, Open: in.Running}}
}

// failed reports whether attempt i ended without finishing: FAILED or
// KILLED, or left open with a later attempt in its place (the launcher
// died with the job).
func failed(atts []gpuhours.Attempt, i int, running bool) bool {
	a := atts[i]
	switch a.Status {
	case "FAILED", "KILLED":
		return true
	case "":
		return a.Open && (i < len(atts)-1 || !running)
	}
	return false
}

func throughput(ranks []int, byRank map[int][]Step) (all, recent Throughput, per []RankThroughput) {
	all, recent = Throughput{-1, -1}, Throughput{-1, -1}
	add := func(t *Throughput, samples, tokens, secs float64, hasS, hasT bool) {
		if secs <= 0 {
			return
		}
		if hasS {
			t.SamplesPerS = max(t.SamplesPerS, 0) + samples/secs
		}
		if hasT {
			t.TokensPerS = max(t.TokensPerS, 0) + tokens/secs
		}
	}
	for _, r := range ranks {
		ss := byRank[r]
		last := ss[len(ss)-1].EndMs
		var sa, to, secs, rsa, rto, rsecs float64
		var hasS, hasT bool
		for _, s := range ss {
			secs += s.StepTimeS
			recentStep := s.EndMs > last-RecentWindowMs
			if recentStep {
				rsecs += s.StepTimeS
			}
			if s.Samples >= 0 {
				sa += s.Samples
				hasS = true
				if recentStep {
					rsa += s.Samples
				}
			}
			if s.Tokens >= 0 {
				to += s.Tokens
				hasT = true
				if recentStep {
					rto += s.Tokens
				}
			}
		}
		rt := RankThroughput{Rank: r, Throughput: Throughput{-1, -1}, Steps: len(ss)}
		add(&rt.Throughput, sa, to, secs, hasS, hasT)
		add(&all, sa, to, secs, hasS, hasT)
		add(&recent, rsa, rto, rsecs, hasS, hasT)
		per = append(per, rt)
	}
	return all, recent, per
}

func breakdown(in Input, atts []gpuhours.Attempt, ref []Step) (Breakdown, []Point) {
	var es []edge
	span := func(cat int, fromUs, toUs int64) {
		if toUs > fromUs {
			es = append(es, edge{fromUs, cat, 1}, edge{toUs, cat, -1})
		}
	}
	stepStart := func(s Step) int64 { return us(s.EndMs) - int64(math.Round(s.StepTimeS*1e6)) }

	// The last complete checkpoint save's start before each failure.
	var saves []runevents.Event
	for _, e := range in.Events {
		if e.Kind == runevents.KindCheckpointSave && e.Checkpoint != nil {
			saves = append(saves, e)
		}
	}
	sort.SliceStable(saves, func(i, j int) bool { return saves[i].TimeMs < saves[j].TimeMs })
	for _, e := range saves {
		blocked := e.Checkpoint.BlockedMs
		if blocked < 0 {
			end := e.EndMs
			if e.Open {
				end = in.NowMs
			}
			blocked = max(0, end-e.TimeMs)
		}
		span(catCheckpoint, us(e.TimeMs), us(e.TimeMs+blocked))
	}
	for _, e := range in.Events {
		isHung := false
		for _, k := range HungKinds {
			isHung = isHung || e.Kind == k
		}
		if !isHung && e.Kind != runevents.KindIdle || e.EndMs == 0 && !e.Open {
			continue
		}
		end := e.EndMs
		if e.Open {
			end = in.NowMs
		}
		cat := catIdle
		if isHung {
			cat = catHung
		}
		span(cat, us(e.TimeMs), us(end))
	}
	for i, a := range atts {
		span(catWall, us(a.StartMs), us(a.EndMs))
		// The attempt's reference steps: those that ended inside it.
		lo := sort.Search(len(ref), func(j int) bool { return ref[j].EndMs >= a.StartMs })
		hi := sort.Search(len(ref), func(j int) bool { return ref[j].EndMs > a.EndMs })
		if i+1 < len(atts) && atts[i+1].StartMs < a.EndMs {
			// Overlapping attempts (several nodes): each step once, in the
			// first attempt that holds it.
			hi = min(hi, sort.Search(len(ref), func(j int) bool { return ref[j].EndMs >= atts[i+1].StartMs }))
		}
		if i > 0 && atts[i-1].EndMs > a.StartMs {
			lo = max(lo, sort.Search(len(ref), func(j int) bool { return ref[j].EndMs > atts[i-1].EndMs }))
		}
		steps := ref[lo:max(lo, hi)]
		first := us(a.EndMs)
		if len(steps) > 0 {
			first = max(us(a.StartMs), stepStart(steps[0]))
		}
		span(catStartup, us(a.StartMs), first)
		lostFrom := int64(math.MaxInt64)
		if failed(atts, i, in.Running) {
			lostFrom = math.MinInt64
			for _, e := range saves {
				if e.TimeMs < a.EndMs && e.Checkpoint.Outcome == runevents.OutcomeComplete {
					lostFrom = us(e.TimeMs)
				}
			}
		}
		for _, s := range steps {
			st, end := stepStart(s), us(s.EndMs)
			if end > lostFrom {
				span(catLost, st, end)
				continue
			}
			mid := st
			if s.DataWaitS > 0 {
				mid = min(end, st+int64(math.Round(s.DataWaitS*1e6)))
				span(catDataWait, st, mid)
			}
			span(catProductive, mid, end)
		}
	}
	sort.Slice(es, func(i, j int) bool { return es[i].at < es[j].at })

	// Sweep: each stretch between two edges goes to the first category
	// covering it, if it is inside an attempt.
	var cnt [numCats]int
	var tot [numCats]int64
	var b Breakdown
	var series []Point
	refEnd := 0 // next reference step end to sample
	var wall, prod int64
	sample := func(at int64) {
		for refEnd < len(ref) && us(ref[refEnd].EndMs) <= at {
			if wall > 0 {
				series = append(series, Point{TimeMs: ref[refEnd].EndMs, Step: ref[refEnd].Step, Goodput: float64(prod) / float64(wall)})
			}
			refEnd++
		}
	}
	for i := 0; i < len(es); {
		at := es[i].at
		sample(at)
		for ; i < len(es) && es[i].at == at; i++ {
			cnt[es[i].cat] += es[i].delta
		}
		if i == len(es) || cnt[catWall] <= 0 {
			continue
		}
		d := es[i].at - at
		c := catWall
		for k := 0; k < catWall; k++ {
			if cnt[k] > 0 {
				c = k
				break
			}
		}
		tot[c] += d
		wall += d
		if c == catProductive {
			prod += d
		}
	}
	sample(math.MaxInt64)
	sec := func(v int64) float64 { return float64(v) / 1e6 }
	b.Checkpoint, b.Lost, b.DataWait, b.Productive = sec(tot[catCheckpoint]), sec(tot[catLost]), sec(tot[catDataWait]), sec(tot[catProductive])
	b.Startup, b.Hung, b.Idle, b.Other = sec(tot[catStartup]), sec(tot[catHung]), sec(tot[catIdle]), sec(tot[catWall])
	b.Wall = sec(wall)
	return b, thin(series, MaxSeriesPoints)
}

// thin keeps at most n of ps, evenly spaced, the last one included.
func thin(ps []Point, n int) []Point {
	if len(ps) <= n {
		return ps
	}
	out := make([]Point, 0, n)
	for i := 0; i < n-1; i++ {
		out = append(out, ps[i*(len(ps)-1)/(n-1)])
	}
	return append(out, ps[len(ps)-1])
}

func mfu(in Input, atts []gpuhours.Attempt, t Throughput, devices int) MFU {
	m := MFU{Devices: devices}
	for i := len(atts) - 1; i >= 0; i-- {
		if atts[i].Model != "" {
			m.Model = atts[i].Model
			break
		}
	}
	m.DType = DefaultDType
	if d := strings.TrimSpace(in.Params[ParamDType]); d != "" {
		nd, ok := NormalizeDType(d)
		if !ok {
			m.DType = d
			m.Reason = "unknown data type " + strconv.Quote(d) + " in " + ParamDType + ": give one of " + strings.Join(dtypes, ", ")
			return m
		}
		m.DType = nd
	}
	perSample, errS := flops(in.Params[ParamFLOPsPerSample])
	perToken, errT := flops(in.Params[ParamFLOPsPerToken])
	switch {
	case errS != "":
		m.Reason = ParamFLOPsPerSample + " " + errS
		return m
	case errT != "":
		m.Reason = ParamFLOPsPerToken + " " + errT
		return m
	case perToken > 0 && t.TokensPerS >= 0:
		m.FLOPsPer, m.Per, m.AchievedFLOPS = perToken, "token", perToken*t.TokensPerS
	case perSample > 0 && t.SamplesPerS >= 0:
		m.FLOPsPer, m.Per, m.AchievedFLOPS = perSample, "sample", perSample*t.SamplesPerS
	case perToken > 0 || perSample > 0:
		m.Reason = "no progress reports with samples (or tokens) to go with the FLOPs given"
		return m
	default:
		m.Reason = "no FLOPs per sample or token: set the run param " + ParamFLOPsPerSample + " or " + ParamFLOPsPerToken
		return m
	}
	if devices == 0 {
		m.Reason = "no rank reported progress"
		return m
	}
	if v := strings.TrimSpace(in.Params[ParamPeakTFLOPS]); v != "" {
		p, err := ParseTFLOPS(v)
		if err != nil {
			m.Reason = ParamPeakTFLOPS + " " + strconv.Quote(v) + " is not a number above 0"
			return m
		}
		m.PeakTFLOPS, m.PeakSource = p, "param "+ParamPeakTFLOPS
	} else {
		p, part, ok := in.Peaks.For(m.Model, m.DType)
		switch {
		case m.Model == "":
			m.Reason = "no GPU model recorded for the run (a CPU job, or not started by sextant run): set the run param " + ParamPeakTFLOPS
			return m
		case part == "":
			m.Reason = "GPU model " + strconv.Quote(m.Model) + " is not in the peak table: set " + ParamPeakTFLOPS + " or the server's --gpu-peak-tflops"
			return m
		case !ok:
			m.Reason = "no " + m.DType + " peak for GPU model " + strconv.Quote(m.Model) + ": set " + ParamPeakTFLOPS + " or the server's --gpu-peak-tflops"
			return m
		}
		m.PeakTFLOPS, m.PeakSource = p, "table: "+part
	}
	m.Value = m.AchievedFLOPS / (float64(devices) * m.PeakTFLOPS * 1e12)
	m.Known = true
	return m
}

// flops parses a FLOPs param: "" gives 0; a bad value a reason.
func flops(v string) (float64, string) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, ""
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, strconv.Quote(v) + " is not a number above 0"
	}
	return f, ""
}
