package sqlstore

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sextant/sextant/internal/tracking"
)

// storeMetrics are the store's Prometheus metrics. They are registered
// with Options.Metrics; without one they count into collectors that
// nobody gathers.
type storeMetrics struct {
	// queued counts the writes submitted to the writer and not yet
	// answered: waiting for a group or in the one being committed.
	queued        atomic.Int64
	commitSeconds prometheus.Histogram
	groupRequests prometheus.Histogram
	points        prometheus.Counter
	logLines      prometheus.Counter
}

// gpuReportingWindow is how recent a node's latest GPU sample must be for
// sextant_gpu_nodes_reporting to count it: a dozen of the agent's default
// 10 s intervals, so one slow or retried request does not make a node
// look gone.
const gpuReportingWindow = 2 * time.Minute

// scrapeTimeout bounds the queries one scrape runs.
const scrapeTimeout = 5 * time.Second

func newStoreMetrics(s *db, r prometheus.Registerer) *storeMetrics {
	m := &storeMetrics{
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sextant_db_commit_duration_seconds",
			Help:    "Time to commit one group of writes (one transaction, one fsync on SQLite).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14), // 0.5 ms to 4 s
		}),
		groupRequests: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sextant_db_commit_requests",
			Help:    "Write requests committed together in one group transaction.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 10), // 1 to 512, the most a group takes
		}),
		points: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sextant_metric_points_ingested_total",
			Help: "Metric points stored (log-batch, log-metric and GPU system metrics), less the duplicates of retried requests.",
		}),
		logLines: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sextant_log_lines_ingested_total",
			Help: "Run log lines stored, less the duplicates of retried requests.",
		}),
	}
	if r == nil {
		return m
	}
	r.MustRegister(m.commitSeconds, m.groupRequests, m.points, m.logLines,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sextant_db_write_queue_depth",
			Help: "Write requests waiting for the database writer or in the group it is committing.",
		}, func() float64 { return float64(m.queued.Load()) }),
		&dbCollector{s: s},
	)
	if rs := s.search; rs.Stats().Indexed {
		r.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name:        "sextant_runs_searches_total",
				Help:        "Runs searches, by how they were answered: from the search index (memory) or with SQL.",
				ConstLabels: prometheus.Labels{"path": "memory"},
			}, func() float64 { return float64(rs.Stats().Memory) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name:        "sextant_runs_searches_total",
				Help:        "Runs searches, by how they were answered: from the search index (memory) or with SQL.",
				ConstLabels: prometheus.Labels{"path": "sql"},
			}, func() float64 { return float64(rs.Stats().SQL) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "sextant_search_index_bytes",
				Help: "Estimated memory held by the runs search index, out of its budget (--search-index-mb).",
			}, func() float64 { return float64(rs.Stats().IndexBytes) }),
		)
	}
	return m
}

// dbCollector reads what it reports from the database at each scrape: the
// database's size, active runs and GPU nodes. On several replicas each
// reports the same shared values.
type dbCollector struct{ s *db }

var (
	dbSizeDesc = prometheus.NewDesc("sextant_db_size_bytes",
		"Size of the database: the SQLite file and its write-ahead log, or the PostgreSQL database.", nil, nil)
	activeRunsDesc = prometheus.NewDesc("sextant_runs_active",
		"Runs with status RUNNING that are not deleted.", nil, nil)
	gpuNodesDesc = prometheus.NewDesc("sextant_gpu_nodes",
		"Nodes (GPU agents and sextant run launchers) with GPU samples within the retention window.", nil, nil)
	gpuReportingDesc = prometheus.NewDesc("sextant_gpu_nodes_reporting",
		"Nodes whose latest GPU sample is less than 2 minutes old.", nil, nil)
)

// Describe implements prometheus.Collector.
func (c *dbCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- dbSizeDesc
	ch <- activeRunsDesc
	ch <- gpuNodesDesc
	ch <- gpuReportingDesc
}

// Collect implements prometheus.Collector. A query that fails is reported
// as that metric's error; the others are still collected.
func (c *dbCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	gauge := func(d *prometheus.Desc, v int64, err error) {
		if err != nil {
			ch <- prometheus.NewInvalidMetric(d, err)
			return
		}
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	size, err := c.s.sizeBytes(ctx)
	gauge(dbSizeDesc, size, err)
	var n int64
	err = c.s.rdb.QueryRowContext(ctx, `SELECT COUNT(*) FROM runs WHERE status = ? AND lifecycle_stage = 'active'`, int(tracking.StatusRunning)).Scan(&n)
	gauge(activeRunsDesc, n, err)
	var nodes, reporting int64
	err = c.s.rdb.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(CASE WHEN latest_ts_ms >= ? THEN 1 ELSE 0 END), 0) FROM gpu_nodes`,
		time.Now().Add(-gpuReportingWindow).UnixMilli()).Scan(&nodes, &reporting)
	gauge(gpuNodesDesc, nodes, err)
	gauge(gpuReportingDesc, reporting, err)
}
