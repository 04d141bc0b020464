package httpapi

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sextant/sextant/internal/blob"
)

// BlobUsageOptions configure a BlobUsageCollector.
type BlobUsageOptions struct {
	// Interval is the time between two measurements of every store; 0
	// means 10 minutes.
	Interval time.Duration
	// Logger receives measurement failures; nil discards them.
	Logger *slog.Logger
}

// BlobUsageCollector measures blob stores in the background and reports the
// latest measurement of each as Prometheus metrics, labelled by the
// store's name: sextant_blob_store_objects, sextant_blob_store_bytes and
// the time of the measurement, sextant_blob_store_measured_timestamp_seconds.
// A scrape never waits for a walk. Measuring starts at once; Close stops it.
type BlobUsageCollector struct {
	stores   map[string]blob.Measurer
	interval time.Duration
	log      *slog.Logger

	mu   sync.Mutex
	last map[string]measured

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type measured struct {
	u  blob.Usage
	at time.Time
}

var (
	blobObjectsDesc = prometheus.NewDesc("sextant_blob_store_objects",
		"Blobs in the store (artifacts, files or volumes) at its latest measurement.", []string{"store"}, nil)
	blobBytesDesc = prometheus.NewDesc("sextant_blob_store_bytes",
		"Total size of the blobs in the store at its latest measurement.", []string{"store"}, nil)
	blobMeasuredDesc = prometheus.NewDesc("sextant_blob_store_measured_timestamp_seconds",
		"When the store was last measured (Unix time).", []string{"store"}, nil)
)

// NewBlobUsageCollector starts measuring stores, by name, every
// opts.Interval.
func NewBlobUsageCollector(stores map[string]blob.Measurer, opts BlobUsageOptions) *BlobUsageCollector {
	if opts.Interval <= 0 {
		opts.Interval = 10 * time.Minute
	}
	c := &BlobUsageCollector{stores: stores, interval: opts.Interval, log: opts.Logger, last: map[string]measured{}}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Go(func() { c.loop(ctx) })
	return c
}

func (c *BlobUsageCollector) loop(ctx context.Context) {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		c.measure(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// measure measures every store once.
func (c *BlobUsageCollector) measure(ctx context.Context) {
	for name, s := range c.stores {
		u, err := s.Usage(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			c.log.Warn("measuring a blob store", "store", name, "err", err)
			continue
		}
		c.mu.Lock()
		c.last[name] = measured{u, time.Now()}
		c.mu.Unlock()
	}
}

// Close stops measuring and waits for a walk in progress to stop.
func (c *BlobUsageCollector) Close(ctx context.Context) error {
	c.cancel()
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Describe implements prometheus.Collector.
func (c *BlobUsageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- blobObjectsDesc
	ch <- blobBytesDesc
	ch <- blobMeasuredDesc
}

// Collect implements prometheus.Collector: the latest measurement of each
// store; a store not measured yet is left out.
func (c *BlobUsageCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, m := range c.last {
		ch <- prometheus.MustNewConstMetric(blobObjectsDesc, prometheus.GaugeValue, float64(m.u.Objects), name)
		ch <- prometheus.MustNewConstMetric(blobBytesDesc, prometheus.GaugeValue, float64(m.u.Bytes), name)
		ch <- prometheus.MustNewConstMetric(blobMeasuredDesc, prometheus.GaugeValue, float64(m.at.UnixMilli())/1e3, name)
	}
}
