package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sextant/sextant/internal/artifacts"
	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/goodput"
	"github.com/sextant/sextant/internal/gpu"
	"github.com/sextant/sextant/internal/gpuhours"
	"github.com/sextant/sextant/internal/httpapi"
	"github.com/sextant/sextant/internal/runevents"
	"github.com/sextant/sextant/internal/runlogs"
	"github.com/sextant/sextant/internal/sqlstore"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/ui"
	"github.com/sextant/sextant/internal/volumes"
	"github.com/sextant/sextant/internal/workspace"
)

// Config is the server's whole configuration. Sources, lowest precedence
// first: DefaultConfig, SEXTANT_* environment variables, flags.
type Config struct {
	Host    string
	Port    int
	DataDir string
	// DB is a PostgreSQL URL; empty means SQLite in DataDir.
	DB string
	// DBPool is the size of the read connection pool (0: the default).
	DBPool      int
	Synchronous string
	// SearchIndexMB is the memory of the runs search index, in MiB
	// (SQLite only); 0 turns the index off.
	SearchIndexMB  int
	LogLevel       string
	LogFormat      string
	MaxBodyBytes   int64
	ShutdownWait   time.Duration
	DebugAddr      string
	SecretFile     string
	BlobStore      string
	S3             S3Config
	Auth           string
	InsecureNoAuth bool
	AdminEmail     string
	// TrustedProxies lists the reverse proxies (addresses and CIDR
	// prefixes, comma-separated) whose X-Forwarded-For names the client
	// for sign-in budgets; empty trusts none.
	TrustedProxies string
	Limits         tracking.Limits
	// GPURetention is how long GPU samples are kept.
	GPURetention time.Duration
	// GPUHealthRetention is how long node health history (GPU faults per
	// node) is kept.
	GPUHealthRetention time.Duration
	// NodeFlagFaults flags a node with at least this many GPU faults (Xid,
	// ECC, lost GPU) in 7 days.
	NodeFlagFaults int
	// GPUHourPrice prices a GPU-hour: "2.50", or by GPU model
	// "H100=4.00,A100=2.50,*=1.00" (gpuhours.ParsePrices); "" means no
	// cost is reported.
	GPUHourPrice string
	// GPUPeakTFLOPS overrides the peak TFLOPS table MFU uses:
	// "MODEL:DTYPE=TFLOPS,...;MODEL2:..." (goodput.ParsePeaks); "" keeps
	// the built-in table.
	GPUPeakTFLOPS string
	// Watch configures the watcher of idle and stalled runs.
	Watch WatchConfig
	// BlobUsageInterval is how often the blob stores are measured for
	// /metrics (sextant_blob_store_bytes); 0 turns measuring off.
	BlobUsageInterval time.Duration
	// Net bounds what clients may hold and which requests are answered.
	Net NetConfig
}

// NetConfig holds the defences against hostile clients and web pages
// (docs/auth.md, "Threat model").
type NetConfig struct {
	// AllowedHosts is a comma-separated list of Host names the server
	// answers besides loopback names and IP addresses (* any); empty
	// means none when authentication is off and any when it is on.
	AllowedHosts string
	// ReadHeaderTimeout is the longest a client may take to send a
	// request's line and headers.
	ReadHeaderTimeout time.Duration
	// IdleTimeout is how long an idle keep-alive connection stays open.
	IdleTimeout time.Duration
	// BodyTimeout is how long a request body may take to deliver
	// BodyMinBytes; 0 turns the check off.
	BodyTimeout time.Duration
	// BodyMinBytes is what a request body must deliver every BodyTimeout.
	BodyMinBytes int64
	// MaxConnsPerClient caps the connections of one client address once
	// the server holds ConnsBeforeClientCap; 0 turns the cap off.
	MaxConnsPerClient int
	// ConnsBeforeClientCap is how many connections the server holds in
	// all before MaxConnsPerClient applies.
	ConnsBeforeClientCap int
}

// DefaultNetConfig returns the defences' defaults.
func DefaultNetConfig() NetConfig {
	return NetConfig{
		ReadHeaderTimeout:    10 * time.Second,
		IdleTimeout:          2 * time.Minute,
		BodyTimeout:          httpapi.DefaultBodyTimeout,
		BodyMinBytes:         httpapi.DefaultBodyMinBytes,
		MaxConnsPerClient:    64,
		ConnsBeforeClientCap: 256,
	}
}

// Validate checks the configuration.
func (n *NetConfig) Validate() error {
	if _, err := httpapi.NewHostPolicy(splitList(n.AllowedHosts)); err != nil {
		return &ConfigError{"allowed-hosts", err.Error()}
	}
	for name, d := range map[string]time.Duration{"read-header-timeout": n.ReadHeaderTimeout, "idle-timeout": n.IdleTimeout} {
		if d < time.Second {
			return &ConfigError{name, fmt.Sprintf("must be at least 1s, got %s", d)}
		}
	}
	if n.BodyTimeout != 0 && n.BodyTimeout < time.Second {
		return &ConfigError{"body-timeout", fmt.Sprintf("must be 0 (off) or at least 1s, got %s", n.BodyTimeout)}
	}
	if n.BodyMinBytes < 1 {
		return &ConfigError{"body-min-bytes", fmt.Sprintf("must be positive, got %d", n.BodyMinBytes)}
	}
	if n.MaxConnsPerClient < 0 || n.ConnsBeforeClientCap < 0 {
		return &ConfigError{"max-conns-per-client", "max-conns-per-client and conns-before-client-cap must be 0 or positive"}
	}
	return nil
}

// hostPolicy is the Host allow-list for a server whose authentication
// is mode: the names configured, or with none, loopback names and IP
// addresses only while anyone who reaches the server acts as its admin,
// any Host once every request needs credentials (a page that rebinds a
// name to the server has none to send).
func (n *NetConfig) hostPolicy(mode httpapi.AuthMode) (*httpapi.HostPolicy, string) {
	if strings.TrimSpace(n.AllowedHosts) == "" {
		if mode == httpapi.AuthOn {
			return httpapi.AnyHost(), "any (authentication is on)"
		}
		return &httpapi.HostPolicy{}, "loopback names and IP addresses"
	}
	p, _ := httpapi.NewHostPolicy(splitList(n.AllowedHosts)) // checked by Validate
	return p, "loopback names, IP addresses and " + n.AllowedHosts
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// DefaultConfig returns the configuration used when nothing is set.
func DefaultConfig() Config {
	return Config{
		Host:        "127.0.0.1",
		Port:        5000,
		DataDir:     "sextant-data",
		Synchronous: "FULL",
		// sqlstore.DefaultSearchIndexBytes.
		SearchIndexMB:      256,
		LogLevel:           "info",
		LogFormat:          "text",
		MaxBodyBytes:       16 << 20,
		ShutdownWait:       15 * time.Second,
		Auth:               "auto",
		BlobStore:          "dir",
		AdminEmail:         "admin@localhost",
		Limits:             tracking.DefaultLimits(),
		GPURetention:       gpu.DefaultRetention,
		GPUHealthRetention: gpu.DefaultHealthRetention,
		NodeFlagFaults:     gpu.DefaultFlagRule().MaxFaults,
		Watch:              DefaultWatchConfig(),
		// A walk of every blob: on S3 one LIST request per 1,000 objects.
		BlobUsageInterval: 10 * time.Minute,
		Net:               DefaultNetConfig(),
	}
}

// ConfigError names the configuration field that is wrong.
type ConfigError struct {
	Field string
	Msg   string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("invalid configuration: %s: %s", e.Field, e.Msg)
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	if c.Port < 0 || c.Port > 65535 {
		return &ConfigError{"port", fmt.Sprintf("must be between 0 and 65535, got %d", c.Port)}
	}
	if c.DataDir == "" {
		return &ConfigError{"data-dir", "must not be empty"}
	}
	if err := validateDB(c); err != nil {
		return err
	}
	if c.BlobUsageInterval < 0 {
		return &ConfigError{"blob-usage-interval", fmt.Sprintf("must be 0 (off) or positive, got %s", c.BlobUsageInterval)}
	}
	if c.GPURetention < time.Minute {
		return &ConfigError{"gpu-retention", fmt.Sprintf("must be at least 1m, got %s", c.GPURetention)}
	}
	if c.GPUHealthRetention < time.Hour {
		return &ConfigError{"gpu-health-retention", fmt.Sprintf("must be at least 1h, got %s", c.GPUHealthRetention)}
	}
	if c.NodeFlagFaults < 1 {
		return &ConfigError{"node-flag-faults", fmt.Sprintf("must be at least 1, got %d", c.NodeFlagFaults)}
	}
	if _, err := gpuhours.ParsePrices(c.GPUHourPrice); err != nil {
		return &ConfigError{"gpu-hour-price", err.Error()}
	}
	if _, err := goodput.ParsePeaks(c.GPUPeakTFLOPS); err != nil {
		return &ConfigError{"gpu-peak-tflops", err.Error()}
	}
	if err := c.Watch.Validate(); err != nil {
		return err
	}
	if err := c.Net.Validate(); err != nil {
		return err
	}
	if c.SearchIndexMB < 0 {
		return &ConfigError{"search-index-mb", fmt.Sprintf("must be 0 (off) or positive, got %d", c.SearchIndexMB)}
	}
	switch strings.ToUpper(c.Synchronous) {
	case "FULL", "NORMAL":
	default:
		return &ConfigError{"sqlite-synchronous", fmt.Sprintf("must be FULL or NORMAL, got %q", c.Synchronous)}
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return &ConfigError{"log-level", err.Error()}
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return &ConfigError{"log-format", fmt.Sprintf("must be text or json, got %q", c.LogFormat)}
	}
	switch c.BlobStore {
	case "dir":
	case "s3":
		if c.S3.Endpoint == "" || c.S3.Bucket == "" {
			return &ConfigError{"blob-store", "s3 needs --s3-endpoint and --s3-bucket"}
		}
	default:
		return &ConfigError{"blob-store", fmt.Sprintf("must be dir or s3, got %q", c.BlobStore)}
	}
	switch c.Auth {
	case "auto", "on", "off":
	default:
		return &ConfigError{"auth", fmt.Sprintf("must be auto, on or off, got %q", c.Auth)}
	}
	if c.Auth == "off" && !isLoopback(c.Host) && !c.InsecureNoAuth {
		return &ConfigError{"auth", fmt.Sprintf("refusing to serve %s without authentication: anyone who can reach it could read and change everything. Use --auth on, bind to 127.0.0.1, or pass --insecure-no-auth if you really mean it", c.Host)}
	}
	if _, err := httpapi.ParseTrustedProxies(c.TrustedProxies); err != nil {
		return &ConfigError{"trusted-proxies", fmt.Sprintf("must be addresses or CIDR prefixes separated by commas (e.g. 127.0.0.1,10.0.0.0/8): %v", err)}
	}
	if c.MaxBodyBytes < 1024 {
		return &ConfigError{"max-request-bytes", "must be at least 1024"}
	}
	l := c.Limits
	for name, v := range map[string]int64{
		"max-metric-steps-per-run": l.MetricStepsPerRun, "max-metric-keys-per-run": int64(l.MetricKeysPerRun),
		"max-params-per-run": int64(l.ParamsPerRun), "max-tags-per-run": int64(l.TagsPerRun),
		"max-param-value-length": int64(l.ParamValueLength), "max-tag-value-length": int64(l.TagValueLength),
		"max-key-length": int64(l.KeyLength), "max-batch-metrics": int64(l.BatchMetrics),
		"max-batch-params": int64(l.BatchParams), "max-batch-tags": int64(l.BatchTags), "max-batch-total": int64(l.BatchTotal),
	} {
		if v <= 0 {
			return &ConfigError{name, fmt.Sprintf("must be positive, got %d", v)}
		}
	}
	return nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	err := l.UnmarshalText([]byte(s))
	if err != nil {
		return 0, fmt.Errorf("must be debug, info, warn or error, got %q", s)
	}
	return l, nil
}

// Groups of flags bindFlags binds: the server takes them all; import and
// migrate only those that pick the database and the files.
const (
	storeFlags = 1 << iota // --data-dir, --db, --db-pool, --sqlite-synchronous
	blobFlags              // --blob-store, --s3-*
	logFlags               // --log-level, --log-format
	serveFlags             // the rest: listening, authentication, limits, ...

	allFlags = storeFlags | blobFlags | logFlags | serveFlags
)

// ServerCommand runs the tracking server.
type ServerCommand struct {
	main *Main
}

// bindFlags binds the config fields of the groups given to flags and the
// environment. Each flag --x-y is also read from SEXTANT_X_Y.
func bindFlags(fs *flag.FlagSet, c *Config, getenv func(string) string, groups int) (envErr error) {
	env := func(name string) (string, bool) {
		v := getenv("SEXTANT_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_")))
		return v, v != ""
	}
	str := func(p *string, name, usage string) {
		if v, ok := env(name); ok {
			*p = v
		}
		fs.StringVar(p, name, *p, usage)
	}
	integer := func(p *int, name, usage string) {
		if v, ok := env(name); ok {
			n, err := strconv.Atoi(v)
			if err != nil && envErr == nil {
				envErr = &ConfigError{name, fmt.Sprintf("SEXTANT_%s must be an integer, got %q", strings.ToUpper(strings.ReplaceAll(name, "-", "_")), v)}
			}
			*p = n
		}
		fs.IntVar(p, name, *p, usage)
	}
	int64v := func(p *int64, name, usage string) {
		if v, ok := env(name); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil && envErr == nil {
				envErr = &ConfigError{name, fmt.Sprintf("SEXTANT_%s must be an integer, got %q", strings.ToUpper(strings.ReplaceAll(name, "-", "_")), v)}
			}
			*p = n
		}
		fs.Int64Var(p, name, *p, usage)
	}
	if groups&serveFlags != 0 {
		str(&c.Host, "host", "address to listen on")
		integer(&c.Port, "port", "port to listen on (0 picks a free port)")
	}
	if groups&storeFlags != 0 {
		str(&c.DataDir, "data-dir", "directory for the database and artifacts")
		str(&c.DB, "db", "PostgreSQL URL (postgres://user:password@host:5432/database) for a database that several replicas share; empty: SQLite in the data directory")
		integer(&c.DBPool, "db-pool", "read connections to the database (0: 4 per CPU for SQLite, 16 for PostgreSQL)")
		str(&c.Synchronous, "sqlite-synchronous", "FULL (survives power loss) or NORMAL (survives a crash of the process)")
	}
	if groups&logFlags != 0 {
		str(&c.LogLevel, "log-level", "debug, info, warn or error")
		str(&c.LogFormat, "log-format", "text or json")
	}
	if groups&serveFlags != 0 {
		str(&c.Auth, "auth", "auto (off on loopback until users exist, on otherwise), on, or off")
		fs.BoolVar(&c.InsecureNoAuth, "insecure-no-auth", c.InsecureNoAuth, "allow --auth off on an address other than loopback (anyone who reaches the server can do anything)")
		str(&c.AdminEmail, "admin-email", "email of the administrator created at first start when authentication is on and there are no users")
		str(&c.TrustedProxies, "trusted-proxies", "reverse proxies (addresses or CIDR prefixes, comma-separated) whose X-Forwarded-For gives the client address for sign-in throttling; empty: the direct peer is the client")
	}
	if groups&blobFlags != 0 {
		str(&c.BlobStore, "blob-store", "where artifacts and files live: dir (under the data directory) or s3")
		str(&c.S3.Endpoint, "s3-endpoint", "S3-compatible endpoint, host:port or URL (with --blob-store s3)")
		str(&c.S3.Bucket, "s3-bucket", "bucket for artifacts and files")
		str(&c.S3.Prefix, "s3-prefix", "key prefix inside the bucket (e.g. sextant/)")
		str(&c.S3.Region, "s3-region", "bucket region (empty: discover)")
		str(&c.S3.AccessKey, "s3-access-key", "access key (default: $AWS_ACCESS_KEY_ID)")
		str(&c.S3.SecretKey, "s3-secret-key", "secret key (default: $AWS_SECRET_ACCESS_KEY)")
		fs.BoolVar(&c.S3.UseSSL, "s3-use-ssl", c.S3.UseSSL, "use HTTPS when the endpoint has no scheme")
		fs.BoolVar(&c.S3.CreateBucket, "s3-create-bucket", c.S3.CreateBucket, "create the bucket if it does not exist")
	}
	if groups&serveFlags == 0 {
		return envErr
	}
	str(&c.SecretFile, "secret-file", "file holding the secret that signs upload URLs (default: created in the data directory)")
	str(&c.DebugAddr, "debug-addr", "serve Go's pprof profiles on this address (e.g. 127.0.0.1:6060); off when empty")
	int64v(&c.MaxBodyBytes, "max-request-bytes", "largest accepted JSON request body, in bytes")
	integer(&c.SearchIndexMB, "search-index-mb", "memory for the runs search index, in MiB (SQLite): the runs of recently searched experiments, kept so that a search reads no SQL; 0 turns it off")
	int64v(&c.Limits.MetricStepsPerRun, "max-metric-steps-per-run", "metric points a run may store, all keys counted")
	integer(&c.Limits.MetricKeysPerRun, "max-metric-keys-per-run", "distinct metric keys a run may have")
	integer(&c.Limits.ParamsPerRun, "max-params-per-run", "params a run may have")
	integer(&c.Limits.TagsPerRun, "max-tags-per-run", "tags a run may have")
	integer(&c.Limits.ParamValueLength, "max-param-value-length", "longest param value, in characters")
	integer(&c.Limits.TagValueLength, "max-tag-value-length", "longest run tag value, in characters")
	integer(&c.Limits.KeyLength, "max-key-length", "longest metric, param or tag key, in characters")
	integer(&c.Limits.BatchMetrics, "max-batch-metrics", "metrics in one log-batch request")
	integer(&c.Limits.BatchParams, "max-batch-params", "params in one log-batch request")
	integer(&c.Limits.BatchTags, "max-batch-tags", "tags in one log-batch request")
	integer(&c.Limits.BatchTotal, "max-batch-total", "metrics, params and tags in one log-batch request")
	if v, ok := env("gpu-retention"); ok {
		d, err := time.ParseDuration(v)
		if err != nil && envErr == nil {
			envErr = &ConfigError{"gpu-retention", fmt.Sprintf("SEXTANT_GPU_RETENTION must be a duration such as 2h, got %q", v)}
		}
		c.GPURetention = d
	}
	fs.DurationVar(&c.GPURetention, "gpu-retention", c.GPURetention, "how long GPU samples are kept (the GPU pane's history)")
	if v, ok := env("gpu-health-retention"); ok {
		d, err := time.ParseDuration(v)
		if err != nil && envErr == nil {
			envErr = &ConfigError{"gpu-health-retention", fmt.Sprintf("SEXTANT_GPU_HEALTH_RETENTION must be a duration such as 2160h, got %q", v)}
		}
		c.GPUHealthRetention = d
	}
	fs.DurationVar(&c.GPUHealthRetention, "gpu-health-retention", c.GPUHealthRetention, "how long node health history (GPU faults per node, across runs) is kept")
	integer(&c.NodeFlagFaults, "node-flag-faults", "flag a node with at least this many GPU faults (Xid, ECC, lost GPU) in 7 days")
	if v, ok := env("gpu-hour-price"); ok {
		c.GPUHourPrice = v
	}
	fs.StringVar(&c.GPUHourPrice, "gpu-hour-price", c.GPUHourPrice, "price of a GPU-hour, for the cost of runs: 2.50, or by GPU model H100=4.00,A100=2.50,*=1.00 (default: no cost)")
	if v, ok := env("gpu-peak-tflops"); ok {
		c.GPUPeakTFLOPS = v
	}
	fs.StringVar(&c.GPUPeakTFLOPS, "gpu-peak-tflops", c.GPUPeakTFLOPS, "override the peak TFLOPS per GPU that MFU uses: 'NVIDIA H100 80GB HBM3:bf16=989.4,fp8=1978.9;My GPU:bf16=100' (default: the built-in table, docs/run.md)")
	if err := bindWatchFlags(fs, &c.Watch, getenv); err != nil && envErr == nil {
		envErr = err
	}
	if v, ok := env("blob-usage-interval"); ok {
		d, err := time.ParseDuration(v)
		if err != nil && envErr == nil {
			envErr = &ConfigError{"blob-usage-interval", fmt.Sprintf("SEXTANT_BLOB_USAGE_INTERVAL must be a duration such as 10m, got %q", v)}
		}
		c.BlobUsageInterval = d
	}
	fs.DurationVar(&c.BlobUsageInterval, "blob-usage-interval", c.BlobUsageInterval, "how often /metrics measures the artifact, file and volume stores (a walk of every blob); 0: never")
	duration := func(p *time.Duration, name, usage string) {
		if v, ok := env(name); ok {
			d, err := time.ParseDuration(v)
			if err != nil && envErr == nil {
				envErr = &ConfigError{name, fmt.Sprintf("SEXTANT_%s must be a duration such as 30s, got %q", strings.ToUpper(strings.ReplaceAll(name, "-", "_")), v)}
			}
			*p = d
		}
		fs.DurationVar(p, name, *p, usage)
	}
	n := &c.Net
	str(&n.AllowedHosts, "allowed-hosts", "Host names the server answers besides localhost and IP addresses, comma-separated (mlflow.example.com, *.example.com, host:port; * for any); empty: none with authentication off, any with it on")
	duration(&n.ReadHeaderTimeout, "read-header-timeout", "longest a client may take to send a request's line and headers")
	duration(&n.IdleTimeout, "idle-timeout", "how long an idle keep-alive connection stays open")
	duration(&n.BodyTimeout, "body-timeout", "a request body must deliver --body-min-bytes within this time, again and again, or the server answers 408 and closes the connection; 0: no limit")
	int64v(&n.BodyMinBytes, "body-min-bytes", "bytes a request body must deliver every --body-timeout")
	integer(&n.MaxConnsPerClient, "max-conns-per-client", "connections one client address may hold once the server holds --conns-before-client-cap; more are answered 429; 0: no cap")
	integer(&n.ConnsBeforeClientCap, "conns-before-client-cap", "connections the server holds, from all clients, before --max-conns-per-client applies")
	return envErr
}

// skipOnFullDisk lets the server start on a full disk without the writes
// it makes at every start to make sure that something exists (the Default
// experiment, the root folders): they were made at an earlier start, and
// the next start makes them again. Any other error is returned.
func skipOnFullDisk(log *slog.Logger, what string, err error) error {
	if err != nil && errs.CodeOf(err) == errs.InsufficientStorage {
		log.Warn("skipped at start: the disk is full", "step", what, "err", err)
		return nil
	}
	return err
}

// lockSQLiteDataDir takes the data directory's lock for a server on SQLite
// (see datadir_lock.go), creating the directory if needed; it returns nil
// for PostgreSQL, and where the file system cannot lock files (with a
// warning).
func lockSQLiteDataDir(cfg Config, log *slog.Logger) (*dataDirLock, error) {
	if cfg.DB != "" {
		return nil, nil
	}
	created, err := ensureDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if created {
		log.Info("created the data directory", "path", absPath(cfg.DataDir))
	}
	lock, err := lockDataDir(cfg.DataDir)
	if errors.Is(err, errLockUnsupported) {
		log.Warn("cannot lock the data directory: make sure that no other server uses it", "data_dir", absPath(cfg.DataDir), "err", err)
		return nil, nil
	}
	return lock, err
}

// Run parses flags and serves until ctx is cancelled.
func (c *ServerCommand) Run(ctx context.Context, fs *flag.FlagSet, args []string) error {
	m := c.main
	cfg := DefaultConfig()
	envErr := bindFlags(fs, &cfg, m.Getenv, allFlags)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if envErr != nil {
		return envErr
	}
	if fs.NArg() > 0 {
		return usageError("server: unexpected arguments: %v", fs.Args())
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	restrictUmask()
	handler := logHandler(m.Stderr, cfg.LogLevel, cfg.LogFormat)
	log := slog.New(handler)
	log.Info("starting sextant", "version", version, "host", cfg.Host, "port", cfg.Port, "data_dir", absPath(cfg.DataDir), "db", redactDB(storeTarget(cfg)),
		"blob_store", cfg.BlobStore, "s3_endpoint", cfg.S3.Endpoint, "s3_bucket", cfg.S3.Bucket, "s3_access_key", mask(cfg.S3.AccessKey), "s3_secret_key", mask(cfg.S3.SecretKey),
		"auth", cfg.Auth,
		"sqlite_synchronous", cfg.Synchronous, "search_index_mb", cfg.SearchIndexMB, "max_request_bytes", cfg.MaxBodyBytes,
		"max_metric_steps_per_run", cfg.Limits.MetricStepsPerRun, "gpu_retention", cfg.GPURetention, "gpu_health_retention", cfg.GPUHealthRetention, "node_flag_faults", cfg.NodeFlagFaults, "gpu_hour_price", cfg.GPUHourPrice, "blob_usage_interval", cfg.BlobUsageInterval)

	// One registry for every component's metrics, served at /metrics.
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "sextant_build_info",
			Help:        "Always 1; the version label says which Sextant serves.",
			ConstLabels: prometheus.Labels{"version": version},
		}, func() float64 { return 1 }),
	)
	lock, err := lockSQLiteDataDir(cfg, log)
	if err != nil {
		return err
	}
	defer lock.Close()
	store, err := openStore(ctx, cfg, log, reg)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownWait)
		defer cancel()
		if err := store.Close(cctx); err != nil {
			log.Error("close store", "err", err)
		}
	}()
	tr := tracking.NewService(store.Tracking(), tracking.Options{Limits: cfg.Limits, Logger: log})
	if err := skipOnFullDisk(log, "ensure the Default experiment", tr.Init(ctx)); err != nil {
		return err
	}
	gpuStore := sqlstore.OpenGPU(store, sqlstore.GPUOptions{Retention: cfg.GPURetention, HealthRetention: cfg.GPUHealthRetention, Logger: log})
	defer gpuStore.Close(context.WithoutCancel(ctx))
	logStore, err := sqlstore.OpenLogs(ctx, store, sqlstore.LogOptions{Logger: log})
	if err != nil {
		return err
	}
	defer logStore.Close(context.WithoutCancel(ctx))
	logSvc := runlogs.NewService(logStore, runlogs.Options{Logger: log.With("component", "runlogs")})
	eventStore, err := sqlstore.OpenEvents(ctx, store)
	if err != nil {
		return err
	}
	eventSvc := runevents.NewService(eventStore, runevents.Options{Logger: log.With("component", "runevents")})
	gpuSvc := gpu.NewService(gpuStore, gpu.ServiceOptions{Retention: cfg.GPURetention, Runs: tr, Events: eventSvc,
		Health: gpu.HealthOptions{History: gpuStore, Rule: gpu.FlagRule{MaxFaults: cfg.NodeFlagFaults}}, BatchMetrics: cfg.Limits.BatchMetrics, Logger: log.With("component", "gpu")})
	stopWatch, err := startWatcher(cfg.Watch, store, eventStore, eventSvc, gpuSvc, tr, log)
	if err != nil {
		return err
	}
	defer stopWatch()
	secret, err := serverSecret(ctx, cfg, store)
	if err != nil {
		return err
	}
	blobs, err := openBlobs(ctx, cfg, "artifacts", m.Getenv, log)
	if err != nil {
		return err
	}
	files, err := openBlobs(ctx, cfg, "files", m.Getenv, log)
	if err != nil {
		return err
	}
	volBlobs, err := openBlobs(ctx, cfg, "volumes", m.Getenv, log)
	if err != nil {
		return err
	}
	warnOpenDataDir(log, cfg)
	if cfg.BlobUsageInterval > 0 {
		stores := map[string]blob.Measurer{}
		for name, b := range map[string]blob.Store{"artifacts": blobs, "files": files, "volumes": volBlobs} {
			if m, ok := b.(blob.Measurer); ok {
				stores[name] = m
			}
		}
		usage := httpapi.NewBlobUsageCollector(stores, httpapi.BlobUsageOptions{Interval: cfg.BlobUsageInterval, Logger: log.With("component", "blob-usage")})
		defer usage.Close(context.WithoutCancel(ctx))
		reg.MustRegister(usage)
	}
	vols := volumes.NewService(store.Volumes(), volBlobs, volumes.Options{Logger: log.With("component", "volumes"), Secret: secret})
	// Releases the upload claims of a server killed before this one (or of
	// a replica that is gone), which would hold back checkpoints' .metadata.
	// On SQLite the data directory's lock, held, proves those servers gone.
	if err := vols.Start(ctx); err != nil {
		return err
	}
	defer func() {
		if err := vols.Close(context.WithoutCancel(ctx)); err != nil {
			log.Warn("release this server's upload claims (they go when its next start, or another replica, finds it gone)", "err", err)
		}
	}()
	if err := vols.RemoveOrphans(ctx); err != nil {
		log.Warn("removing the files of deleted volumes", "err", err)
	}
	ws := workspace.NewService(store.Workspace(), workspace.Options{Logger: log.With("component", "workspace"), Resources: vols})
	if err := skipOnFullDisk(log, "ensure the root folders and their grants", ws.Init(ctx)); err != nil {
		return err
	}
	mode, err := authMode(ctx, cfg, ws, m.Stderr, log)
	if err != nil {
		return err
	}
	hosts, hostsDesc := cfg.Net.hostPolicy(mode)
	bodyTimeout := cfg.Net.BodyTimeout
	if bodyTimeout == 0 {
		bodyTimeout = -1 // httpapi: negative is off
	}
	log.Info("request limits", "allowed_hosts", hostsDesc, "read_header_timeout", cfg.Net.ReadHeaderTimeout, "idle_timeout", cfg.Net.IdleTimeout,
		"body_timeout", cfg.Net.BodyTimeout, "body_min_bytes", cfg.Net.BodyMinBytes,
		"max_conns_per_client", cfg.Net.MaxConnsPerClient, "conns_before_client_cap", cfg.Net.ConnsBeforeClientCap)
	proxies, _ := httpapi.ParseTrustedProxies(cfg.TrustedProxies) // checked by Validate
	prices, _ := gpuhours.ParsePrices(cfg.GPUHourPrice)           // checked by Validate
	peaks, _ := goodput.ParsePeaks(cfg.GPUPeakTFLOPS)             // checked by Validate
	api := httpapi.New(httpapi.Options{
		Tracking:     tr,
		Artifacts:    artifacts.New(blobs, artifacts.Options{Secret: secret}),
		Workspace:    ws,
		Files:        files,
		Auth:         mode,
		Version:      mlflowAPIVersion,
		MaxBodyBytes: cfg.MaxBodyBytes,
		Logger:       log.With("component", "http"),
		GPU:          gpuSvc,
		RunLogs:      logSvc,
		Events:       eventSvc,
		GPUHours:     httpapi.GPUHoursOptions{Store: eventStore, Prices: prices},
		GPUPeaks:     peaks,
		UI:           ui.MustNew(),
		Volumes:      vols,
		Metrics:      reg,
		Gatherer:     reg,
		AllowedHosts: hosts,
		BodyTimeout:  bodyTimeout,
		BodyMinBytes: cfg.Net.BodyMinBytes,
		// Sign-in budgets are kept per client address (docs/auth.md).
		TrustedProxies: proxies,
		Health: func() httpapi.StoreHealth {
			h := store.Health()
			return httpapi.StoreHealth{Writable: h.Writable, Reason: h.Reason, SinceMs: h.SinceMs}
		},
	})

	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)))
	if err != nil {
		return err
	}
	// Caps connections per client; net/http's own 431 goes out as JSON.
	ln = httpapi.Listener(ln, httpapi.ListenerOptions{MaxConnsPerClient: cfg.Net.MaxConnsPerClient, ConnsBeforeClientCap: cfg.Net.ConnsBeforeClientCap, Metrics: reg})
	srv := &http.Server{
		Handler:           api,
		MaxHeaderBytes:    httpapi.MaxHeaderBytes,
		ReadHeaderTimeout: cfg.Net.ReadHeaderTimeout,
		IdleTimeout:       cfg.Net.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(handler, slog.LevelWarn),
	}
	// Long polls of run logs end at once when the server shuts down.
	srv.RegisterOnShutdown(logSvc.Close)
	if cfg.DebugAddr != "" {
		dbg, err := startDebugServer(cfg.DebugAddr)
		if err != nil {
			return err
		}
		defer dbg.Close()
		log.Info("debug listener (pprof)", "addr", "http://"+cfg.DebugAddr+"/debug/pprof/")
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("listening", "addr", "http://"+ln.Addr().String())
	if lock != nil {
		if err := lock.setAddr("http://" + ln.Addr().String()); err != nil {
			log.Warn("the data directory's lock does not name this server's address", "err", err)
		}
	}
	if m.Ready != nil {
		m.Ready(ln.Addr().String())
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing requests in flight", "wait", cfg.ShutdownWait)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownWait)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("shutdown", "err", err)
	}
	return nil
}
