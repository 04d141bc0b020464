package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sextant/sextant/internal/client"
	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/progress"
	"github.com/sextant/sextant/internal/runevents"
	"github.com/sextant/sextant/internal/tracking"
)

// `sextant runs ls`, and the look-ups that let `sextant logs` take a run's
// name or --last instead of its id.

// firstContactRetryFor bounds how long a client command (runs, logs,
// users, volumes...) retries a server that has not answered it yet before
// it gives up: someone is waiting at the terminal, and a wrong port or a
// stopped server is the likely cause. Once the server has answered (logs
// -f, a long volumes cp), a failure is more likely a restart, and the
// client's usual 60 s apply.
const firstContactRetryFor = 10 * time.Second

// newClient returns a client of the server at uri with the credentials of
// the environment, as the mlflow client reads them, for a client command:
// it says at once when the server cannot be reached, and gives up after
// firstContactRetryFor when the server never answered.
func (m *Main) newClient(uri, agent string) (*client.Client, error) {
	cl, err := client.New(uri, client.Options{
		Token: m.Getenv("MLFLOW_TRACKING_TOKEN"), Username: m.Getenv("MLFLOW_TRACKING_USERNAME"), Password: m.Getenv("MLFLOW_TRACKING_PASSWORD"),
		InsecureTLS: strings.EqualFold(m.Getenv("MLFLOW_TRACKING_INSECURE_TLS"), "true"), UserAgent: agent + "/" + version,
		RetryUntilReached: firstContactRetryFor, Unreachable: m.sayUnreachable(uri),
	})
	if err != nil {
		return nil, &exitError{code: 2, err: &ConfigError{"server", errs.MessageOf(err)}}
	}
	return cl, nil
}

// sayUnreachable returns a client.Options.Unreachable that tells the user,
// on stderr, that the server at uri cannot be reached and for how long the
// command keeps trying.
func (m *Main) sayUnreachable(uri string) func(err error, retryFor time.Duration) {
	return func(err error, retryFor time.Duration) {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		fmt.Fprintf(m.Stderr, "sextant: cannot reach the server at %s (%v); retrying for up to %s\n", strings.TrimRight(uri, "/"), err, retryFor)
	}
}

// runScope is the runs a look-up searches: one experiment, or every
// experiment the caller can read.
type runScope struct {
	ids   []string
	names map[string]string // experiment id -> name
}

// scopeOf resolves --experiment (a name; "" for every experiment).
func scopeOf(ctx context.Context, cl *client.Client, experiment string) (runScope, error) {
	sc := runScope{names: map[string]string{}}
	if experiment != "" {
		e, err := cl.GetExperimentByName(ctx, experiment)
		if err != nil {
			if errs.CodeOf(err) == errs.NotFound {
				return sc, errs.Errorf(errs.NotFound, "no experiment named %q", experiment)
			}
			return sc, err
		}
		sc.ids, sc.names[e.ID] = []string{e.ID}, e.Name
		return sc, nil
	}
	exps, err := cl.SearchExperiments(ctx, "")
	if err != nil {
		return sc, err
	}
	for _, e := range exps {
		sc.ids = append(sc.ids, e.ID)
		sc.names[e.ID] = e.Name
	}
	return sc, nil
}

// filterString quotes s as a string of MLflow's search grammar.
func filterString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// newestRuns returns up to limit runs of the scope matching filter, newest
// first.
func newestRuns(ctx context.Context, cl *client.Client, sc runScope, filter string, limit int) ([]*tracking.Run, error) {
	if len(sc.ids) == 0 {
		return nil, nil
	}
	return cl.SearchRuns(ctx, sc.ids, filter, []string{"attributes.start_time DESC"}, limit)
}

// findRun returns the run arg names: a run id, else a run name (the newest
// run of that name; a note on w says when there are several), searched in
// experiment ("" for every experiment).
func findRun(ctx context.Context, cl *client.Client, w io.Writer, arg, experiment string) (*tracking.Run, error) {
	if tracking.ValidateRunID(arg) == nil {
		run, err := cl.GetRun(ctx, arg)
		if err == nil {
			return run, nil
		}
		if errs.CodeOf(err) != errs.NotFound {
			return nil, err
		}
	}
	sc, err := scopeOf(ctx, cl, experiment)
	if err != nil {
		return nil, err
	}
	runs, err := newestRuns(ctx, cl, sc, "attributes.run_name = "+filterString(arg), 100)
	if err != nil {
		return nil, err
	}
	where := "any experiment you can read"
	if experiment != "" {
		where = "experiment " + experiment
	}
	switch len(runs) {
	case 0:
		return nil, errs.Errorf(errs.NotFound, "no run has the id or name %q in %s (sextant runs ls lists them)", arg, where)
	case 1:
	default:
		more := strconv.Itoa(len(runs))
		if len(runs) == 100 {
			more = "at least 100"
		}
		fmt.Fprintf(w, "sextant: %s runs are named %s in %s: showing the newest, %s (started %s); give a run id for another\n",
			more, arg, where, runs[0].Info.RunID, fmtTime(runs[0].Info.StartTimeMs))
	}
	return runs[0], nil
}

// lastRun returns the newest run of experiment ("" for every experiment):
// on a multi-user server the newest one the signed-in user started.
func lastRun(ctx context.Context, cl *client.Client, experiment string) (*tracking.Run, error) {
	filter, who := "", ""
	id, err := cl.WhoAmI(ctx)
	switch {
	case err == nil && id.MultiUser:
		filter, who = "attributes.user_id = "+filterString(id.Email), " of "+id.Email
	case err == nil, errs.CodeOf(err) == errs.NotFound:
	default:
		return nil, err
	}
	sc, err := scopeOf(ctx, cl, experiment)
	if err != nil {
		return nil, err
	}
	runs, err := newestRuns(ctx, cl, sc, filter, 1)
	if err != nil {
		return nil, err
	}
	if len(runs) == 0 {
		where := ""
		if experiment != "" {
			where = " in experiment " + experiment
		}
		return nil, errs.Errorf(errs.NotFound, "there is no run%s%s yet", who, where)
	}
	return runs[0], nil
}

var runStatuses = []string{"RUNNING", "SCHEDULED", "FINISHED", "FAILED", "KILLED"}

// runsLs is `sextant runs ls`.
func runsLs(ctx context.Context, m *Main, fs *flag.FlagSet, args []string) error {
	server := serverFlag(fs, m.Getenv)
	experiment := fs.String("experiment", "", "only the runs of this experiment (its name, e.g. /Users/alice@example.com/train)")
	status := fs.String("status", "", "only runs with this status: "+strings.Join(runStatuses, ", "))
	limit := fs.Int("limit", 20, "at most this many runs (1 to 1000)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("runs ls: unexpected arguments %v (the experiment goes in --experiment)", pos)
	}
	if *limit < 1 || *limit > 1000 {
		return usageError("runs ls: --limit must be 1 to 1000, got %d", *limit)
	}
	filter := ""
	if *status != "" {
		st := strings.ToUpper(*status)
		if !slices.Contains(runStatuses, st) {
			return usageError("runs ls: --status must be one of %s, got %q", strings.Join(runStatuses, ", "), *status)
		}
		filter = "attributes.status = " + filterString(st)
	}
	cl, err := m.newClient(*server, "sextant-runs")
	if err != nil {
		return err
	}
	sc, err := scopeOf(ctx, cl, *experiment)
	if err != nil {
		return err
	}
	runs, err := newestRuns(ctx, cl, sc, filter, *limit)
	if err != nil {
		return err
	}
	if len(runs) == 0 {
		fmt.Fprintln(m.Stderr, "no runs")
		return nil
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	head := "NAME\tRUN ID\tSTATUS\tSTARTED\tDURATION\tMETRICS"
	if *experiment == "" {
		head += "\tEXPERIMENT"
	}
	// Runs the server found idle or stalled (docs/run.md) carry the
	// watcher's alert; the column shows only when one does.
	alerts := false
	for _, r := range runs {
		alerts = alerts || runAlert(r) != ""
	}
	if alerts {
		head += "\tALERT"
	}
	gh := runsGPUHours(ctx, cl, m.Stderr, runs)
	head += gh.head()
	gp := runsGoodput(ctx, cl, m.Stderr, runs)
	head += gp.head()
	fmt.Fprintln(tw, head)
	now := time.Now()
	for _, r := range runs {
		i := r.Info
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", orDash(i.RunName), i.RunID, i.Status, fmtTime(i.StartTimeMs), runDuration(i, now), metricSummary(r.Data.Metrics, 2))
		if *experiment == "" {
			line += "\t" + sc.names[i.ExperimentID]
		}
		if alerts {
			line += "\t" + orDash(runAlert(r))
		}
		line += gh.cells(i.RunID)
		line += gp.cell(i.RunID)
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

// endStatuses are the statuses runs end takes.
var endStatuses = []string{"KILLED", "FAILED", "FINISHED"}

// runsEnd is `sextant runs end`: a run whose job died without ending it
// (killed by the OOM killer, a preempted node) stays RUNNING for ever.
func runsEnd(ctx context.Context, m *Main, fs *flag.FlagSet, args []string) error {
	server := serverFlag(fs, m.Getenv)
	experiment := fs.String("experiment", "", "find the run by name in this experiment only (its name, e.g. /Users/alice@example.com/train)")
	status := fs.String("status", "KILLED", "the status it ends with: "+strings.Join(endStatuses, ", "))
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError("runs end: give one run (its id or name), got %d arguments", len(pos))
	}
	st := strings.ToUpper(*status)
	if !slices.Contains(endStatuses, st) {
		return usageError("runs end: --status must be one of %s, got %q", strings.Join(endStatuses, ", "), *status)
	}
	cl, err := m.newClient(*server, "sextant-runs")
	if err != nil {
		return err
	}
	run, err := findRun(ctx, cl, m.Stderr, pos[0], *experiment)
	if err != nil {
		return err
	}
	i := run.Info
	if i.Status != tracking.StatusRunning && i.Status != tracking.StatusScheduled {
		fmt.Fprintf(m.Stdout, "run %s (%s) ended already: %s at %s; left as it is\n", orDash(i.RunName), i.RunID, i.Status, fmtTime(i.EndTimeMs))
		return nil
	}
	rs, _ := tracking.ParseRunStatus(st)
	end := time.Now().UnixMilli()
	if err := cl.UpdateRun(ctx, i.RunID, tracking.RunUpdate{Status: &rs, EndTimeMs: &end}); err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "ended run %s (%s): %s\n", orDash(i.RunName), i.RunID, st)
	return nil
}

// runAlert is a running run's alert: GPUs idle or no output for a while.
func runAlert(r *tracking.Run) string {
	if r.Info.Status != tracking.StatusRunning {
		return ""
	}
	for _, t := range r.Data.Tags {
		if t.Key == runevents.TagAlert {
			return t.Value
		}
	}
	return ""
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// fmtTime prints a time in milliseconds in the local time zone, to the
// second.
func fmtTime(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return time.UnixMilli(ms).Format("2006-01-02 15:04:05")
}

// runDuration is how long a run took, or has been running.
func runDuration(i tracking.RunInfo, now time.Time) string {
	if i.StartTimeMs <= 0 {
		return "-"
	}
	end := i.EndTimeMs
	if end <= 0 {
		if i.Status.Terminal() {
			return "-"
		}
		end = now.UnixMilli()
	}
	d := time.Duration(max(end-i.StartTimeMs, 0)) * time.Millisecond
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// auxMetric reports whether a metric is Sextant's rather than the job's:
// the GPU sampler's system/ metrics and the progress reports'
// sextant/progress/ metrics.
func auxMetric(key string) bool {
	return strings.HasPrefix(key, "system/") || strings.HasPrefix(key, progress.KeyPrefix)
}

// metricSummary shows the latest values of up to n metrics, system and
// progress metrics last, each key sorted.
func metricSummary(ms []tracking.Metric, n int) string {
	ms = append([]tracking.Metric(nil), ms...)
	sort.Slice(ms, func(a, b int) bool {
		sa, sb := auxMetric(ms[a].Key), auxMetric(ms[b].Key)
		if sa != sb {
			return !sa
		}
		return ms[a].Key < ms[b].Key
	})
	var parts []string
	for _, mt := range ms[:min(n, len(ms))] {
		parts = append(parts, mt.Key+"="+fmtValue(mt.Value))
	}
	if len(ms) > n {
		parts = append(parts, fmt.Sprintf("(+%d)", len(ms)-n))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func fmtValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}
