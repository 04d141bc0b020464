package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/sextant/sextant/internal/gpu"
)

var _ gpu.HealthHistory = (*GPUStore)(nil)

// AppendHealth implements gpu.HealthHistory in one writer op: insert each
// record unless the same fault is stored (then add the run ids it lacked),
// then close the open throttle spans the ends close. The look-up walks
// gpu_health_node (node, time).
func (g *GPUStore) AppendHealth(ctx context.Context, recs []gpu.HealthRecord, ends []gpu.HealthEnd) error {
	if len(recs) == 0 && len(ends) == 0 {
		return nil
	}
	return g.s.w.do(ctx, func(tx *wtx) error {
		for _, r := range recs {
			open := 0
			if r.Open {
				open = 1
			}
			runs := strings.Join(r.RunIDs, ",")
			// The same fault already stored (a resend, another sampler of
			// the node, a repeat): keep one, with the runs.
			cond := `ts_ms >= ? AND ts_ms <= ?`
			if r.Kind == "throttle" {
				cond = `(` + cond + ` OR is_open = 1)`
			}
			var key, stored string
			err := tx.queryRow(`SELECT hkey, run_ids FROM gpu_health WHERE node = ? AND gpu_uuid = ? AND gpu_index = ? AND kind = ? AND xid = ? AND `+cond+` LIMIT 1`,
				r.Node, r.GPUUUID, r.GPUIndex, r.Kind, r.Xid, r.TimeMs-gpu.HealthMergeWindowMs, r.TimeMs+gpu.HealthMergeWindowMs).Scan(&key, &stored)
			switch {
			case err == nil:
				if stored == "" && runs != "" {
					if _, err := tx.exec(`UPDATE gpu_health SET run_ids = ? WHERE hkey = ?`, runs, key); err != nil {
						return sqlError(err, "update GPU health record")
					}
				}
				continue
			case !errors.Is(err, sql.ErrNoRows):
				return sqlError(err, "read GPU health history")
			}
			if _, err := tx.exec(`INSERT INTO gpu_health (hkey, node, ts_ms, end_ms, is_open, gpu_index, gpu_uuid, gpu_model, kind, xid, message, run_ids)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
				ON CONFLICT (hkey) DO UPDATE SET run_ids = excluded.run_ids
				WHERE gpu_health.run_ids = '' AND excluded.run_ids <> ''`,
				r.Key, r.Node, r.TimeMs, r.EndMs, open, r.GPUIndex, r.GPUUUID, r.GPUModel, r.Kind, r.Xid, r.Message, runs); err != nil {
				return sqlError(err, "store GPU health record")
			}
		}
		for _, e := range ends {
			if _, err := tx.exec(`UPDATE gpu_health SET is_open = 0, end_ms = ?
				WHERE node = ? AND kind = 'throttle' AND is_open = 1 AND gpu_uuid = ? AND gpu_index = ? AND ts_ms <= ?`,
				e.TimeMs, e.Node, e.GPUUUID, e.GPUIndex, e.TimeMs); err != nil {
				return sqlError(err, "close GPU throttle span")
			}
		}
		return nil
	})
}

// ListHealth implements gpu.HealthHistory.
func (g *GPUStore) ListHealth(ctx context.Context, q gpu.HealthQuery) ([]gpu.HealthRecord, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	sqlText := `SELECT hkey, node, ts_ms, end_ms, is_open, gpu_index, gpu_uuid, gpu_model, kind, xid, message, run_ids FROM gpu_health WHERE ts_ms >= ?`
	args := []any{q.FromMs}
	if q.Node != "" {
		sqlText += ` AND node = ?`
		args = append(args, q.Node)
	}
	if q.BeforeMs != 0 {
		sqlText += ` AND (ts_ms < ? OR (ts_ms = ? AND hkey < ?))`
		args = append(args, q.BeforeMs, q.BeforeMs, q.BeforeKey)
	}
	sqlText += ` ORDER BY ts_ms DESC, hkey DESC LIMIT ?`
	args = append(args, limit)
	rows, err := g.s.rdb.QueryContext(ctx, sqlText, args...)
	if err != nil {
		return nil, sqlError(err, "read GPU health history")
	}
	var out []gpu.HealthRecord
	for rows.Next() {
		var r gpu.HealthRecord
		var open int64
		var runs string
		if err := rows.Scan(&r.Key, &r.Node, &r.TimeMs, &r.EndMs, &open, &r.GPUIndex, &r.GPUUUID, &r.GPUModel, &r.Kind, &r.Xid, &r.Message, &runs); err != nil {
			rows.Close()
			return nil, sqlError(err, "read GPU health history")
		}
		r.Open = open != 0
		if runs != "" {
			r.RunIDs = strings.Split(runs, ",")
		}
		out = append(out, r)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, sqlError(err, "read GPU health history")
	}
	return out, nil
}

// PruneHealth implements gpu.HealthHistory.
func (g *GPUStore) PruneHealth(ctx context.Context, cutoffMs int64) (int64, error) {
	var n int64
	err := g.s.w.do(ctx, func(tx *wtx) error {
		res, err := tx.exec(`DELETE FROM gpu_health WHERE ts_ms < ?`, cutoffMs)
		if err != nil {
			return sqlError(err, "prune GPU health history")
		}
		n, _ = res.RowsAffected()
		return nil
	})
	return n, err
}
