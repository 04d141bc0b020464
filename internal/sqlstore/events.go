package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"

	"github.com/sextant/sextant/internal/runevents"
	"github.com/sextant/sextant/internal/tracking"
)

// EventStore is the SQL implementation of runevents.Store. An append is
// one op of the Store's group commit; lists read the read pool.
type EventStore struct {
	s *Store
}

var _ runevents.Store = (*EventStore)(nil)

// OpenEvents returns the run-event part of s.
func OpenEvents(ctx context.Context, s *Store) (*EventStore, error) {
	if err := s.createTrigger(ctx, "run event purge", eventPurgeTrigger); err != nil {
		return nil, err
	}
	return &EventStore{s: s}, nil
}

// AppendEvents implements runevents.Store.
func (e *EventStore) AppendEvents(ctx context.Context, runID string, evs []runevents.Event, maxEvents int) ([]int64, error) {
	data := make([][]byte, len(evs))
	for i := range evs {
		data[i] = runevents.EncodeData(&evs[i])
	}
	var seqs []int64
	err := e.s.w.do(ctx, func(tx *wtx) error {
		seqs = make([]int64, len(evs))
		var runPK int64
		var stage string
		err := tx.queryRow(`SELECT run_pk, lifecycle_stage FROM runs WHERE run_id = ?`, runID).Scan(&runPK, &stage)
		if errors.Is(err, sql.ErrNoRows) {
			return tracking.RunNotFound(runID)
		}
		if err != nil {
			return sqlError(err, "get run")
		}
		if stage != "active" {
			return runevents.RunDeleted(runID)
		}
		// The state row is locked on PostgreSQL so that replicas appending
		// to one run take turns.
		if _, err := tx.exec(`INSERT INTO run_event_state (run_pk, next_seq, events) VALUES (?, 1, 0) ON CONFLICT (run_pk) DO NOTHING`, runPK); err != nil {
			return sqlError(err, "create event state")
		}
		var next, count int64
		if err := tx.queryRow(`SELECT next_seq, events FROM run_event_state WHERE run_pk = ?`+tx.lock(), runPK).Scan(&next, &count); err != nil {
			return sqlError(err, "read event state")
		}
		stored := map[string]bool{}
		adding := 0
		for i := range evs {
			k := evs[i].Key
			if k == "" {
				adding++
				continue
			}
			if _, seen := stored[k]; seen {
				continue
			}
			var seq int64
			err := tx.queryRow(`SELECT seq FROM run_events WHERE run_pk = ? AND key = ?`, runPK, k).Scan(&seq)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				stored[k] = false
				adding++
			case err != nil:
				return sqlError(err, "read event")
			default:
				stored[k] = true
			}
		}
		if err := runevents.CheckEvents(int(count), adding, maxEvents); err != nil {
			return err
		}
		for i := range evs {
			ev := &evs[i]
			seq := next
			next++
			key := ev.Key
			if key == "" {
				key = "seq-" + strconv.FormatInt(seq, 10)
			} else if _, err := tx.exec(`DELETE FROM run_events WHERE run_pk = ? AND key = ?`, runPK, key); err != nil {
				return sqlError(err, "replace event")
			}
			if _, err := tx.exec(`INSERT INTO run_events (run_pk, seq, key, kind, severity, time_ms, end_ms, is_open, node, gpu, step, message, data)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				runPK, seq, key, int64(ev.Kind), int64(ev.Severity), ev.TimeMs, ev.EndMs, boolInt(ev.Open), ev.Node, int64(ev.GPU), ev.Step, ev.Message, string(data[i])); err != nil {
				return sqlError(err, "store event")
			}
			seqs[i] = seq
		}
		if _, err := tx.exec(`UPDATE run_event_state SET next_seq = ?, events = ? WHERE run_pk = ?`, next, count+int64(adding), runPK); err != nil {
			return sqlError(err, "update event state")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return seqs, nil
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// ListEvents implements runevents.Store.
func (e *EventStore) ListEvents(ctx context.Context, q runevents.Query, nowMs int64) (runevents.Page, error) {
	tx, err := e.s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return runevents.Page{}, sqlError(err, "list events")
	}
	defer tx.Rollback()
	var pk int64
	var stage string
	err = tx.QueryRowContext(ctx, `SELECT run_pk, lifecycle_stage FROM runs WHERE run_id = ?`, q.RunID).Scan(&pk, &stage)
	if errors.Is(err, sql.ErrNoRows) {
		return runevents.Page{}, tracking.RunNotFound(q.RunID)
	}
	if err != nil {
		return runevents.Page{}, sqlError(err, "list events")
	}
	if stage != "active" {
		return runevents.Page{}, runevents.RunDeleted(q.RunID)
	}
	var b strings.Builder
	b.WriteString(`SELECT seq, key, kind, severity, time_ms, end_ms, is_open, node, gpu, step, message, data FROM run_events WHERE run_pk = ? AND seq > ?`)
	args := []any{pk, q.AfterSeq}
	if len(q.Kinds) > 0 {
		b.WriteString(` AND kind IN (`)
		for i, k := range q.Kinds {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('?')
			args = append(args, int64(k))
		}
		b.WriteByte(')')
	}
	if q.OpenOnly {
		b.WriteString(` AND is_open = 1`)
	}
	if q.ToMs > 0 {
		b.WriteString(` AND time_ms < ?`)
		args = append(args, q.ToMs)
	}
	if q.FromMs > 0 {
		// An open span reaches to now, a closed one to end_ms, an instant
		// is its time.
		open := `is_open = 1`
		if nowMs < q.FromMs {
			open = `(is_open = 1 AND time_ms >= ?)`
			args = append(args, q.FromMs)
		}
		b.WriteString(` AND (` + open + ` OR (is_open = 0 AND end_ms > 0 AND end_ms >= ?) OR (is_open = 0 AND end_ms = 0 AND time_ms >= ?))`)
		args = append(args, q.FromMs, q.FromMs)
	}
	b.WriteString(` ORDER BY seq`)
	if q.Limit > 0 {
		b.WriteString(` LIMIT ?`)
		args = append(args, q.Limit+1)
	}
	rows, err := tx.QueryContext(ctx, b.String(), args...)
	if err != nil {
		return runevents.Page{}, sqlError(err, "list events")
	}
	defer rows.Close()
	var p runevents.Page
	for rows.Next() {
		var ev runevents.Event
		var kind, sev, open, gpu int64
		var data string
		if err := rows.Scan(&ev.Seq, &ev.Key, &kind, &sev, &ev.TimeMs, &ev.EndMs, &open, &ev.Node, &gpu, &ev.Step, &ev.Message, &data); err != nil {
			return runevents.Page{}, sqlError(err, "scan event")
		}
		if q.Limit > 0 && len(p.Events) == q.Limit {
			p.NextSeq = p.Events[len(p.Events)-1].Seq
			break
		}
		ev.Kind, ev.Severity, ev.Open, ev.GPU = runevents.Kind(kind), runevents.Severity(sev), open != 0, int(gpu)
		if err := runevents.DecodeData([]byte(data), &ev); err != nil {
			return runevents.Page{}, err
		}
		p.Events = append(p.Events, ev)
	}
	if err := rows.Err(); err != nil {
		return runevents.Page{}, sqlError(err, "list events")
	}
	return p, nil
}

var _ runevents.Activity = (*EventStore)(nil)

// RunningRuns implements runevents.Activity: the active RUNNING runs, with
// when they last logged a metric (other than system/ metrics), a line of
// output, or an event (other than the watcher's own spans: idle, stalled,
// straggler, and the launcher's hung spans).
func (e *EventStore) RunningRuns(ctx context.Context) ([]runevents.RunActivity, error) {
	rows, err := e.s.rdb.QueryContext(ctx, `SELECT r.run_id, r.name, r.experiment_id, r.start_time,
		COALESCE((SELECT MAX(ms.timestamp) FROM metric_series ms WHERE ms.run_pk = r.run_pk AND ms.key NOT LIKE 'system/%'), 0),
		COALESCE((SELECT s.last_append_ms FROM run_log_state s WHERE s.run_pk = r.run_pk), 0),
		COALESCE((SELECT MAX(CASE WHEN ev.end_ms > ev.time_ms THEN ev.end_ms ELSE ev.time_ms END) FROM run_events ev
			WHERE ev.run_pk = r.run_pk AND ev.kind NOT IN (?, ?, ?, ?)), 0)
		FROM runs r WHERE r.status = ? AND r.lifecycle_stage = 'active' ORDER BY r.run_pk`,
		int64(runevents.KindIdle), int64(runevents.KindStalled), int64(runevents.KindStraggler), int64(runevents.KindHung), int64(tracking.StatusRunning))
	if err != nil {
		return nil, sqlError(err, "list running runs")
	}
	defer rows.Close()
	var out []runevents.RunActivity
	for rows.Next() {
		var a runevents.RunActivity
		var exp int64
		if err := rows.Scan(&a.RunID, &a.RunName, &exp, &a.StartMs, &a.LastMetricMs, &a.LastLogMs, &a.LastEventMs); err != nil {
			return nil, sqlError(err, "scan running run")
		}
		a.ExperimentID = strconv.FormatInt(exp, 10)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, sqlError(err, "list running runs")
	}
	return out, nil
}
