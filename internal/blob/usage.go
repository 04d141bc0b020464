package blob

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/prometheus/client_golang/prometheus"
)

// Usage is how much a store holds.
type Usage struct {
	// Objects is the number of blobs (and, in a directory, the parts of
	// multipart uploads in progress).
	Objects int64
	// Bytes is their total size.
	Bytes int64
}

// Measurer is a store that can tell how much it holds. Usage walks the
// whole store: its cost grows with the number of blobs (a directory walk;
// on S3 one LIST request per 1,000 objects).
type Measurer interface {
	Usage(ctx context.Context) (Usage, error)
}

var (
	_ Measurer = (*Dir)(nil)
	_ Measurer = (*S3)(nil)
)

// Usage implements Measurer: the blobs and the parts of uploads in
// progress. Deleted blobs waiting for the reaper are not counted.
func (d *Dir) Usage(ctx context.Context) (Usage, error) {
	var u Usage
	for _, dir := range []string{dirBlobs, dirUploads} {
		err := fs.WalkDir(d.root.FS(), dir, func(p string, de fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil // removed while walking
				}
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			if !de.Type().IsRegular() {
				return nil
			}
			fi, err := de.Info()
			if err != nil {
				return nil // removed while walking
			}
			u.Objects++
			u.Bytes += fi.Size()
			return nil
		})
		if err != nil {
			return Usage{}, fsError(err, "measure "+d.path)
		}
	}
	return u, nil
}

// Usage implements Measurer: the objects under the store's prefix, listed
// without a delimiter (1,000 a request).
func (s *S3) Usage(ctx context.Context) (Usage, error) {
	var u Usage
	for o := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix, Recursive: true}) {
		if o.Err != nil {
			return Usage{}, s.error(ctx, o.Err, "measure", s.prefix)
		}
		u.Objects++
		u.Bytes += o.Size
	}
	return u, nil
}

// UsageOptions configure a UsageCollector.
type UsageOptions struct {
	// Interval is the time between two measurements of every store; 0
	// means 10 minutes.
	Interval time.Duration
	// Logger receives measurement failures; nil discards them.
	Logger *slog.Logger
}

// UsageCollector measures blob stores in the background and reports the
// latest measurement of each as Prometheus metrics, labelled by the
// store's name: sextant_blob_store_objects, sextant_blob_store_bytes and
// the time of the measurement, sextant_blob_store_measured_timestamp_seconds.
// A scrape never waits for a walk. Measuring starts at once; Close stops it.
type UsageCollector struct {
	stores   map[string]Measurer
	interval time.Duration
	log      *slog.Logger

	mu   sync.Mutex
	last map[string]measured

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type measured struct {
	u  Usage
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

// NewUsageCollector starts measuring stores, by name, every
// opts.Interval.
func NewUsageCollector(stores map[string]Measurer, opts UsageOptions) *UsageCollector {
	if opts.Interval <= 0 {
		opts.Interval = 10 * time.Minute
	}
	c := &UsageCollector{stores: stores, interval: opts.Interval, log: opts.Logger, last: map[string]measured{}}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Go(func() { c.loop(ctx) })
	return c
}

func (c *UsageCollector) loop(ctx context.Context) {
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
func (c *UsageCollector) measure(ctx context.Context) {
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
func (c *UsageCollector) Close(ctx context.Context) error {
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
func (c *UsageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- blobObjectsDesc
	ch <- blobBytesDesc
	ch <- blobMeasuredDesc
}

// Collect implements prometheus.Collector: the latest measurement of each
// store; a store not measured yet is left out.
func (c *UsageCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, m := range c.last {
		ch <- prometheus.MustNewConstMetric(blobObjectsDesc, prometheus.GaugeValue, float64(m.u.Objects), name)
		ch <- prometheus.MustNewConstMetric(blobBytesDesc, prometheus.GaugeValue, float64(m.u.Bytes), name)
		ch <- prometheus.MustNewConstMetric(blobMeasuredDesc, prometheus.GaugeValue, float64(m.at.UnixMilli())/1e3, name)
	}
}
