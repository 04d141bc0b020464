package sqlstore

import (
	"context"
	"strconv"
	"strings"

	"github.com/sextant/sextant/internal/gpuhours"
	"github.com/sextant/sextant/internal/runevents"
	"github.com/sextant/sextant/internal/tracking"
)

var _ gpuhours.Store = (*EventStore)(nil)

// gpuHoursChunk caps the ids of one IN list.
const gpuHoursChunk = 500

// Runs implements gpuhours.Store: the attempt events of the selected
// runs, read with the runs' status and end time.
func (e *EventStore) Runs(ctx context.Context, q gpuhours.Query) ([]gpuhours.Run, error) {
	if q.All {
		return e.attemptRuns(ctx, "", nil)
	}
	var out []gpuhours.Run
	for col, ids := range map[string][]string{"r.run_id": q.RunIDs, "r.experiment_id": q.ExperimentIDs} {
		for len(ids) > 0 {
			n := min(len(ids), gpuHoursChunk)
			args := make([]any, n)
			for i, id := range ids[:n] {
				if col == "r.experiment_id" {
					v, err := strconv.ParseInt(id, 10, 64)
					if err != nil {
						continue // no such experiment
					}
					args[i] = v
				} else {
					args[i] = id
				}
			}
			ids = ids[n:]
			runs, err := e.attemptRuns(ctx, ` AND `+col+` IN (?`+strings.Repeat(`,?`, n-1)+`)`, args)
			if err != nil {
				return nil, err
			}
			out = append(out, runs...)
		}
	}
	return out, nil
}

func (e *EventStore) attemptRuns(ctx context.Context, where string, args []any) ([]gpuhours.Run, error) {
	rows, err := e.s.rdb.QueryContext(ctx, `SELECT r.run_id, r.experiment_id, r.status, COALESCE(r.end_time, 0),
		ev.key, ev.time_ms, ev.end_ms, ev.is_open, ev.node, ev.data
		FROM runs r JOIN run_events ev ON ev.run_pk = r.run_pk
		WHERE ev.kind = ? AND r.lifecycle_stage = 'active'`+where+`
		ORDER BY r.run_pk, ev.time_ms`, append([]any{int64(runevents.KindAttempt)}, args...)...)
	if err != nil {
		return nil, sqlError(err, "list attempts")
	}
	defer rows.Close()
	var out []gpuhours.Run
	for rows.Next() {
		var runID, data string
		var exp, status, endMs, open int64
		ev := runevents.Event{Kind: runevents.KindAttempt, GPU: -1, Step: -1}
		if err := rows.Scan(&runID, &exp, &status, &endMs, &ev.Key, &ev.TimeMs, &ev.EndMs, &open, &ev.Node, &data); err != nil {
			return nil, sqlError(err, "scan attempt")
		}
		ev.Open = open != 0
		if err := runevents.DecodeData([]byte(data), &ev); err != nil {
			return nil, err
		}
		if len(out) == 0 || out[len(out)-1].RunID != runID {
			out = append(out, gpuhours.Run{RunID: runID, ExperimentID: strconv.FormatInt(exp, 10),
				Running: tracking.RunStatus(status) == tracking.StatusRunning, EndMs: endMs})
		}
		r := &out[len(out)-1]
		r.Attempts = append(r.Attempts, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, sqlError(err, "list attempts")
	}
	return out, nil
}

// Experiments implements gpuhours.Store.
func (e *EventStore) Experiments(ctx context.Context) ([]gpuhours.Experiment, error) {
	rows, err := e.s.rdb.QueryContext(ctx, `SELECT experiment_id, name FROM experiments WHERE lifecycle_stage = 'active' ORDER BY experiment_id`)
	if err != nil {
		return nil, sqlError(err, "list experiments")
	}
	defer rows.Close()
	var out []gpuhours.Experiment
	for rows.Next() {
		var id int64
		var x gpuhours.Experiment
		if err := rows.Scan(&id, &x.Name); err != nil {
			return nil, sqlError(err, "scan experiment")
		}
		x.ID = strconv.FormatInt(id, 10)
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, sqlError(err, "list experiments")
	}
	return out, nil
}
