package sqlstore

import (
	"context"
	"database/sql"

	"github.com/sextant/sextant/internal/gpu"
	"github.com/sextant/sextant/internal/sqlstore/sqlrow"
)

// Latest implements gpu.Store. Without a run the newest samples come from
// gpu_nodes, one row per node; for a run, from each of the run's nodes'
// newest sample of that run.
func (g *GPUStore) Latest(ctx context.Context, q gpu.Selection) ([]gpu.NodeSample, error) {
	var (
		sqlText string
		args    []any
	)
	if q.RunID == "" {
		sqlText = `SELECT name, latest_ts_ms, latest_run_id, latest_node_rank, latest_data FROM gpu_nodes`
		if len(q.Nodes) > 0 {
			sqlText += ` WHERE name IN (` + sqlrow.Placeholders(len(q.Nodes)) + `)`
			args = stringArgs(q.Nodes)
		}
		sqlText += ` ORDER BY name`
	} else {
		sqlText = `SELECT n.name, s.ts_ms, s.run_id, s.node_rank, s.data
			FROM (SELECT node_pk, MAX(ts_ms) AS ts FROM gpu_samples WHERE run_id = ? GROUP BY node_pk) m
			JOIN gpu_samples s ON s.node_pk = m.node_pk AND s.ts_ms = m.ts
			JOIN gpu_nodes n ON n.node_pk = m.node_pk`
		args = []any{q.RunID}
		if len(q.Nodes) > 0 {
			sqlText += ` WHERE n.name IN (` + sqlrow.Placeholders(len(q.Nodes)) + `)`
			args = append(args, stringArgs(q.Nodes)...)
		}
		sqlText += ` ORDER BY n.name`
	}
	return g.scanLatest(ctx, sqlText, args)
}

// Scan implements gpu.Store. Each query walks an index in (node,
// timestamp) order: the primary key for nodes, gpu_samples_run for a run.
// Rows carry the node's key, not its name: a name per row would cost an
// allocation per row, and a query of two hours of 64 GPUs reads thousands.
func (g *GPUStore) Scan(ctx context.Context, q gpu.Selection, fromMs, toMs int64, fn func(*gpu.NodeSample) error) error {
	var (
		sqlText string
		args    []any
	)
	if q.RunID != "" {
		sqlText = `SELECT s.node_pk, s.ts_ms, s.run_id, s.node_rank, s.data
			FROM gpu_samples s WHERE s.run_id = ? AND s.ts_ms >= ? AND s.ts_ms < ?`
		args = []any{q.RunID, fromMs, toMs}
		if len(q.Nodes) > 0 {
			sqlText += ` AND s.node_pk IN (SELECT node_pk FROM gpu_nodes WHERE name IN (` + sqlrow.Placeholders(len(q.Nodes)) + `))`
			args = append(args, stringArgs(q.Nodes)...)
		}
		sqlText += ` ORDER BY s.node_pk, s.ts_ms`
	} else {
		sqlText = `SELECT s.node_pk, s.ts_ms, s.run_id, s.node_rank, s.data
			FROM gpu_nodes n JOIN gpu_samples s ON s.node_pk = n.node_pk
			WHERE s.ts_ms >= ? AND s.ts_ms < ?`
		args = []any{fromMs, toMs}
		if len(q.Nodes) > 0 {
			sqlText += ` AND n.name IN (` + sqlrow.Placeholders(len(q.Nodes)) + `)`
			args = append(args, stringArgs(q.Nodes)...)
		}
		// By name: the IN list walks the name index in name order, so no
		// sort is needed (ordering by node_pk sorted every row, blobs
		// included, in a temporary B-tree).
		sqlText += ` ORDER BY n.name, s.ts_ms`
	}
	rows, err := g.s.rdb.QueryContext(ctx, sqlText, args...)
	if err != nil {
		return sqlError(err, "read GPU samples")
	}
	defer rows.Close()
	var (
		ns        gpu.NodeSample
		pk, last  int64 = 0, -1
		run, data sql.RawBytes
		rank      sql.NullInt64
		bad       int
	)
	for rows.Next() {
		if err := rows.Scan(&pk, &ns.TimestampMs, &run, &rank, &data); err != nil {
			return sqlError(err, "read GPU samples")
		}
		if pk != last {
			if err := g.s.rdb.QueryRowContext(ctx, `SELECT name FROM gpu_nodes WHERE node_pk = ?`, pk).Scan(&ns.Node); err != nil {
				return sqlError(err, "read GPU node")
			}
			last = pk
		}
		// Comparing before converting keeps the previous row's string
		// without allocating.
		if ns.RunID != string(run) {
			ns.RunID = string(run)
		}
		ns.NodeRank = -1
		if rank.Valid {
			ns.NodeRank = int(rank.Int64)
		}
		if err := gpu.DecodeSample(data, &ns.Sample); err != nil {
			bad++
			continue
		}
		if err := fn(&ns); err != nil {
			return err
		}
	}
	if bad > 0 {
		g.log.Warn("skipped damaged GPU samples", "count", bad)
	}
	return sqlError(rows.Err(), "read GPU samples")
}

// scanLatest runs a query whose columns are (node name, ts, run id, node
// rank, packed data) and returns the rows as NodeSamples.
func (g *GPUStore) scanLatest(ctx context.Context, sqlText string, args []any) ([]gpu.NodeSample, error) {
	rows, err := g.s.rdb.QueryContext(ctx, sqlText, args...)
	if err != nil {
		return nil, sqlError(err, "read GPU samples")
	}
	defer rows.Close()
	var out []gpu.NodeSample
	for rows.Next() {
		var (
			ns   gpu.NodeSample
			run  sql.NullString
			rank sql.NullInt64
			data []byte
		)
		if err := rows.Scan(&ns.Node, &ns.TimestampMs, &run, &rank, &data); err != nil {
			return nil, sqlError(err, "read GPU samples")
		}
		ns.RunID, ns.NodeRank = run.String, -1
		if rank.Valid {
			ns.NodeRank = int(rank.Int64)
		}
		if err := gpu.DecodeSample(data, &ns.Sample); err != nil {
			g.log.Warn("skipped a damaged GPU sample", "node", ns.Node, "ts_ms", ns.TimestampMs, "err", err)
			continue
		}
		out = append(out, ns)
	}
	return out, sqlError(rows.Err(), "read GPU samples")
}

func stringArgs(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
