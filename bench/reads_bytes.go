package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// bytesSeries are the series of the bytes-per-point part. All have steps
// 0..n-1 and timestamps 7 ms apart with 0-2 ms of jitter.
var bytesSeries = []struct {
	name, about string
	gen         seriesGen
}{
	{"random_float64", "uniform random float64 in [0, 1): 52 random mantissa bits, about 54 bits of information a value", uniformValues},
	{"smooth_float64", "a loss curve without noise in float64: 0.1 + 2 exp(-5 step/n)", func(_ *rand.Rand, i, n int) float64 {
		return 0.1 + 2*math.Exp(-5*float64(i)/float64(n))
	}},
	{"smooth_float32", "the same curve as PyTorch's loss.item() of a float32 tensor gives it: rounded to float32", func(_ *rand.Rand, i, n int) float64 {
		return float64(float32(0.1 + 2*math.Exp(-5*float64(i)/float64(n))))
	}},
	{"noisy_loss_float64", "the ingest benchmark's shape: the float64 curve plus N(0, 0.01) noise", func(rng *rand.Rand, i, n int) float64 {
		return 0.1 + 2*math.Exp(-5*float64(i)/float64(n)) + rng.NormFloat64()*0.01
	}},
}

// readsBytes logs each series into a fresh Sextant data directory, stops
// the server cleanly and measures the directory.
func readsBytes(ctx context.Context, c config, sx peerSpec, dir string) (map[string]any, error) {
	n := c.bytesPoints
	out := map[string]any{
		"points_per_series":     n,
		"how":                   "one series per fresh data directory, logged in 1000-point log-batch requests; the server idles 7 s (compaction), stops on SIGTERM; bytes_per_point is every file of the data directory (WAL included) over the points, on PostgreSQL (-db postgres) the bytes of the database's tables (heap, indexes, TOAST; not the WAL, which PostgreSQL's databases share)",
		"target_random_float64": 9,
		"target_smooth":         3,
	}
	for _, bs := range bytesSeries {
		d := filepath.Join(dir, bs.name)
		s, err := sx.start(ctx, d)
		if err != nil {
			return nil, err
		}
		cl := newClient(s.url)
		exp, err := cl.createExperiment(ctx, "bench-reads-bytes")
		if err != nil {
			s.kill()
			return nil, err
		}
		run, err := cl.createRun(ctx, exp, bs.name, time.Now().UnixMilli())
		if err != nil {
			s.kill()
			return nil, err
		}
		if err := logSeries(ctx, cl, run, "loss", n, 4, bs.gen, nil); err != nil {
			s.kill()
			return nil, err
		}
		time.Sleep(7 * time.Second)
		if err := s.stop(); err != nil {
			return nil, err
		}
		total := dirSize(d)
		m := map[string]any{
			"about":          bs.about,
			"data_dir_bytes": total,
		}
		if pg.srv != nil {
			// The data directory holds nothing of the points.
			if total, err = pg.tablesBytes(ctx, d); err != nil {
				return nil, err
			}
			m["postgres_tables_bytes"] = total
		} else if st, err := sqliteStats(filepath.Join(d, "sextant.db")); err != nil {
			m["sqlite_breakdown"] = "unavailable: " + err.Error()
		} else {
			st.perPoint(n)
			m["sqlite_breakdown"] = st
		}
		m["bytes_per_point"] = round3(float64(total) / float64(n))
		out[bs.name] = m
		logf("reads: %s: %.2f bytes/point", bs.name, float64(total)/float64(n))
	}
	return out, nil
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// dbStats is where a SQLite file's bytes go, per point: the chunk blobs
// themselves (the encoding), and what SQLite adds around them.
type dbStats struct {
	FileBytes       int64              `json:"file_bytes"`
	PageSize        int64              `json:"page_size"`
	ChunkRows       int64              `json:"chunk_rows"`
	ChunkDataBytes  int64              `json:"chunk_data_bytes"`
	FreePageBytes   int64              `json:"free_page_bytes"`
	ByObject        map[string]int64   `json:"bytes_by_table_or_index"`
	PerPoint        map[string]float64 `json:"per_point"`
	ChunkTableBytes int64              `json:"-"`
}

func (s *dbStats) perPoint(n int) {
	f := func(b int64) float64 { return round3(float64(b) / float64(n)) }
	var idx int64
	for name, b := range s.ByObject {
		if strings.HasPrefix(name, "metric_chunks_") || strings.HasPrefix(name, "sqlite_autoindex_metric_chunks") {
			idx += b
		}
	}
	s.PerPoint = map[string]float64{
		"file":                    f(s.FileBytes),
		"chunk_data":              f(s.ChunkDataBytes),
		"chunk_table_overhead":    f(s.ChunkTableBytes - s.ChunkDataBytes),
		"chunk_indexes":           f(idx),
		"free_pages":              f(s.FreePageBytes),
		"everything_else_in_file": f(s.FileBytes - s.ChunkTableBytes - idx - s.FreePageBytes),
	}
}

// sqliteStats reads dbStats with the sqlite3 command-line shell (its dbstat
// table; the Go driver is built without it). Absent shell: an error.
func sqliteStats(path string) (*dbStats, error) {
	q := func(sql string) ([]map[string]any, error) {
		out, err := exec.Command("sqlite3", "-readonly", "-json", path, sql).Output()
		if err != nil {
			return nil, fmt.Errorf("sqlite3: %w", err)
		}
		var rows []map[string]any
		if len(strings.TrimSpace(string(out))) == 0 {
			return nil, nil
		}
		return rows, json.Unmarshal(out, &rows)
	}
	num := func(v any) int64 {
		switch x := v.(type) {
		case float64:
			return int64(x)
		case string:
			n, _ := strconv.ParseInt(x, 10, 64)
			return n
		}
		return 0
	}
	st := &dbStats{ByObject: map[string]int64{}}
	rows, err := q(`SELECT name, SUM(pgsize) AS bytes FROM dbstat GROUP BY name`)
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		st.ByObject[fmt.Sprint(r["name"])] = num(r["bytes"])
	}
	st.ChunkTableBytes = st.ByObject["metric_chunks"]
	rows, err = q(`SELECT COUNT(*) AS n, COALESCE(SUM(length(data)), 0) AS data,
		(SELECT page_size FROM pragma_page_size) AS ps, (SELECT freelist_count FROM pragma_freelist_count) AS free,
		(SELECT page_count FROM pragma_page_count) AS pages FROM metric_chunks`)
	if err != nil || len(rows) != 1 {
		return nil, fmt.Errorf("chunk totals: %v", err)
	}
	r := rows[0]
	st.ChunkRows, st.ChunkDataBytes, st.PageSize = num(r["n"]), num(r["data"]), num(r["ps"])
	st.FreePageBytes = num(r["free"]) * st.PageSize
	st.FileBytes = num(r["pages"]) * st.PageSize
	return st, nil
}
