package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/runlogs"
)

// Log compaction merges the small chunks of a run's log (an append of a
// few lines makes one) into full ones. It reads and re-encodes in its own
// goroutine, through the read pool, and hands the writer one op that
// swaps the old chunks for the new; appends only add chunks after the
// last one, so the chunks it read are still there unless the run was
// purged meanwhile, which the swap checks.

// request queues a run for compaction; it never blocks.
func (l *LogStore) request(runPK int64) {
	l.mu.Lock()
	l.pending[runPK] = struct{}{}
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *LogStore) next() (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for pk := range l.pending {
		delete(l.pending, pk)
		return pk, true
	}
	return 0, false
}

func (l *LogStore) compactLoop(ctx context.Context) {
	sweep := time.NewTicker(l.opts.SweepEvery)
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.wake:
		case <-sweep.C:
			// Appends queue their own run on the replica that took them;
			// the sweep for quiet runs is one replica's job at a time.
			if !l.s.leader(ctx, "log-compaction", l.opts.SweepEvery) {
				continue
			}
			pks, err := l.quietRuns(ctx)
			if err != nil {
				if ctx.Err() == nil {
					l.log.Error("log compaction sweep", "err", err)
				}
				continue
			}
			for _, pk := range pks {
				l.request(pk)
			}
		}
		for ctx.Err() == nil {
			pk, ok := l.next()
			if !ok {
				break
			}
			if err := l.compactRun(ctx, pk); err != nil && ctx.Err() == nil {
				l.log.Error("log compaction failed", "run_pk", pk, "err", err)
			}
		}
	}
}

// quietRuns lists runs with small chunks that have had no append for
// QuietAfter.
func (l *LogStore) quietRuns(ctx context.Context) ([]int64, error) {
	cutoff := l.now().Add(-l.opts.QuietAfter).UnixMilli()
	rows, err := l.s.rdb.QueryContext(ctx, `SELECT run_pk FROM run_log_state WHERE small_chunks >= 2 AND last_append_ms <= ? LIMIT 256`, cutoff)
	if err != nil {
		return nil, sqlError(err, "list runs to compact")
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var pk int64
		if err := rows.Scan(&pk); err != nil {
			return nil, sqlError(err, "list runs to compact")
		}
		out = append(out, pk)
	}
	return out, sqlError(rows.Err(), "list runs to compact")
}

// CompactLogs merges every run's small log chunks now, instead of waiting
// for the background compaction; tests and benchmarks use it.
func (l *LogStore) CompactLogs(ctx context.Context) error {
	rows, err := l.s.rdb.QueryContext(ctx, `SELECT run_pk FROM run_log_state WHERE small_chunks >= 2`)
	if err != nil {
		return sqlError(err, "list runs to compact")
	}
	var pks []int64
	for rows.Next() {
		var pk int64
		if err := rows.Scan(&pk); err != nil {
			rows.Close()
			return sqlError(err, "list runs to compact")
		}
		pks = append(pks, pk)
	}
	rows.Close()
	for _, pk := range pks {
		if err := l.compactRun(ctx, pk); err != nil {
			return err
		}
	}
	return nil
}

type smallChunk struct {
	id        int64
	firstLine int64
	count     int
	data      []byte
}

// errLogCompactionRace means the chunks compaction read are gone (the run
// was purged); the swap is abandoned.
var errLogCompactionRace = errors.New("log compaction: chunks changed while compacting")

// compactRun merges each stretch of consecutive small chunks of a run.
func (l *LogStore) compactRun(ctx context.Context, runPK int64) error {
	rows, err := l.s.rdb.QueryContext(ctx, `SELECT chunk_id, first_line, count, data FROM run_log_chunks
		WHERE run_pk = ? AND is_full = 0 ORDER BY first_line`, runPK)
	if err != nil {
		return sqlError(err, "read small log chunks")
	}
	var small []smallChunk
	for rows.Next() {
		var c smallChunk
		if err := rows.Scan(&c.id, &c.firstLine, &c.count, &c.data); err != nil {
			rows.Close()
			return sqlError(err, "read small log chunks")
		}
		small = append(small, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return sqlError(err, "read small log chunks")
	}
	type swap struct {
		old   []int64
		first int64
		next  []runlogs.Chunk
	}
	var swaps []swap
	for i := 0; i < len(small); {
		// A stretch: small chunks that follow each other with no full
		// chunk between them.
		j := i + 1
		for j < len(small) && small[j].firstLine == small[j-1].firstLine+int64(small[j-1].count) {
			j++
		}
		if j-i >= 2 {
			var lines []runlogs.Line
			sw := swap{first: small[i].firstLine}
			for _, c := range small[i:j] {
				if lines, err = runlogs.DecodeChunk(lines, c.data, c.firstLine); err != nil {
					return errs.Wrap(errs.Internal, fmt.Errorf("log chunk %d: %w", c.id, err), "stored log data is corrupt")
				}
				sw.old = append(sw.old, c.id)
			}
			first := sw.first
			for _, part := range runlogs.CutChunks(lines) {
				sw.next = append(sw.next, runlogs.ChunkOf(part, first, runlogs.CompressSmall))
				first += int64(len(part))
			}
			swaps = append(swaps, sw)
		}
		i = j
	}
	if len(swaps) == 0 {
		return nil
	}
	err = l.s.w.do(ctx, func(tx *wtx) error {
		for _, sw := range swaps {
			for _, id := range sw.old {
				res, err := tx.exec(`DELETE FROM run_log_chunks WHERE chunk_id = ? AND run_pk = ?`, id, runPK)
				if err != nil {
					return sqlError(err, "compact log")
				}
				if n, _ := res.RowsAffected(); n != 1 {
					return errLogCompactionRace
				}
			}
			for i := range sw.next {
				c := &sw.next[i]
				if _, err := tx.exec(`INSERT INTO run_log_chunks (run_pk, first_line, count, min_ts, max_ts, nodes, streams, raw_bytes, is_full, data)
					VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
					runPK, c.FirstLine, c.Count, c.MinTimestampMs, c.MaxTimestampMs, int64(c.Nodes), int64(c.Streams), c.RawBytes,
					runlogs.Full(c.Count, c.RawBytes), c.Data); err != nil {
					return sqlError(err, "compact log")
				}
			}
		}
		_, err := tx.exec(`UPDATE run_log_state SET small_chunks = (SELECT COUNT(*) FROM run_log_chunks WHERE run_pk = ? AND is_full = 0) WHERE run_pk = ?`, runPK, runPK)
		return sqlError(err, "compact log")
	})
	if errors.Is(err, errLogCompactionRace) {
		return nil
	}
	return err
}
