// Package s3 is the blob store in an S3-compatible bucket: the only
// importer of minio-go, kept out of package blob so that the domain
// packages, which store blobs through blob.Store, import no S3 or HTTP
// library.
package s3

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/sextant/sextant/internal/blob"
	"github.com/sextant/sextant/internal/errs"
)

// Store is a blob.Store in a bucket of an S3-compatible object store (AWS S3,
// MinIO, and the like), under an optional key prefix.
//
// Objects are atomic on S3, so Put needs no staging: an upload that fails
// leaves the old object. Memory per call is bounded and independent of the
// blob's size: Put of a blob of known size up to Options.PartSize streams
// it in one request with no buffer; any other Put uploads parts from
// Options.PartConcurrency buffers of the part size (32 MiB with the
// defaults; see Options.PartSize for when parts grow). Open streams the
// response body. PutPart streams its body.
type Store struct {
	client *minio.Client
	core   minio.Core
	bucket string
	prefix string
	opts   Options
	log    *slog.Logger
	// bufs holds part buffers of PartSize bytes between Puts.
	bufs sync.Pool
}

var _ blob.Store = (*Store)(nil)

// Options configures an S3 store.
type Options struct {
	// Endpoint is the store's host and port ("s3.amazonaws.com",
	// "127.0.0.1:9000"), or a URL whose scheme sets UseSSL
	// ("http://127.0.0.1:9000").
	Endpoint string
	// Bucket is the bucket's name.
	Bucket string
	// Prefix is prepended to every key: "" or a valid key followed by "/",
	// so that several stores (or other data) can share a bucket.
	Prefix string
	// Region is the bucket's region; "" lets the client discover it.
	Region string
	// AccessKey, SecretKey and SessionToken are static credentials. An
	// empty AccessKey sends anonymous requests.
	AccessKey, SecretKey, SessionToken string
	// UseSSL selects HTTPS when Endpoint has no scheme.
	UseSSL bool
	// CreateBucket makes Open create the bucket if it does not exist,
	// instead of failing.
	CreateBucket bool
	// PartSize is the size of the parts Put uploads when a blob is larger
	// or of unknown size, in bytes: 0 means 16 MiB; at least blob.MinPartSize,
	// at most blob.MaxPartSize. A Put of known size over blob.MaxPartNumber parts
	// uses larger parts (size/blob.MaxPartNumber). With unknown size, parts
	// double every 2000 parts (from 31 GiB on with the default), which
	// allows about 969 GiB; the buffers grow with them.
	PartSize int64
	// PartConcurrency is how many parts of one Put are uploaded at once;
	// each needs a buffer of the part size. 0 means 2: one part uploads
	// while the next is read.
	PartConcurrency int
	// MaxAttempts is how many times a request is tried when it fails for a
	// reason that may pass (a network error, a 5xx, throttling), with
	// backoff in between: 0 means minio-go's default (10), 1 no retry.
	// Requests that stream a body of the caller (Put up to PartSize,
	// PutPart) are tried once whatever this says.
	MaxAttempts int
	// Transport carries the requests; nil means minio-go's default.
	Transport http.RoundTripper
	// Logger receives warnings (a failed cleanup). nil discards.
	Logger *slog.Logger
}

// DefaultOptions returns the options Open uses for zero tuning fields.
func DefaultOptions() Options {
	return Options{PartSize: 16 << 20, PartConcurrency: 2}
}

// Open connects to the store and checks that the bucket exists, creating
// it when opts.CreateBucket is set. A missing bucket is errs.NotFound; a
// store that cannot be reached, errs.Unavailable.
func Open(ctx context.Context, opts Options) (*Store, error) {
	def := DefaultOptions()
	if opts.PartSize == 0 {
		opts.PartSize = def.PartSize
	}
	if opts.PartConcurrency <= 0 {
		opts.PartConcurrency = def.PartConcurrency
	}
	switch {
	case opts.Endpoint == "":
		return nil, errs.E(errs.Invalid, "S3 store: empty endpoint")
	case opts.Bucket == "":
		return nil, errs.E(errs.Invalid, "S3 store: empty bucket name")
	case opts.PartSize < blob.MinPartSize || opts.PartSize > blob.MaxPartSize:
		return nil, errs.Errorf(errs.Invalid, "S3 store: part size %d is out of range [%d, %d]", opts.PartSize, blob.MinPartSize, int64(blob.MaxPartSize))
	}
	if err := blob.ValidatePrefix(opts.Prefix); err != nil {
		return nil, errs.Errorf(errs.Invalid, "S3 store: %s", errs.MessageOf(err))
	}
	host, secure := opts.Endpoint, opts.UseSSL
	if strings.Contains(host, "://") {
		u, err := url.Parse(host)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" {
			return nil, errs.Errorf(errs.Invalid, "S3 store: endpoint %q is not host:port or http(s)://host:port", opts.Endpoint)
		}
		host, secure = u.Host, u.Scheme == "https"
	}
	client, err := minio.New(host, &minio.Options{
		Creds:      credentials.NewStaticV4(opts.AccessKey, opts.SecretKey, opts.SessionToken),
		Secure:     secure,
		Region:     opts.Region,
		Transport:  opts.Transport,
		MaxRetries: opts.MaxAttempts,
	})
	if err != nil {
		return nil, errs.Wrap(errs.Invalid, err, "S3 store: bad endpoint "+opts.Endpoint)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		client: client,
		core:   minio.Core{Client: client},
		bucket: opts.Bucket,
		prefix: opts.Prefix,
		opts:   opts,
		log:    log.With("component", "blob.s3", "bucket", opts.Bucket),
	}
	ok, err := client.BucketExists(ctx, opts.Bucket)
	if err != nil {
		return nil, s.error(ctx, err, "check bucket", opts.Bucket)
	}
	if !ok {
		if !opts.CreateBucket {
			return nil, &errs.Error{
				Code: errs.NotFound,
				Msg:  fmt.Sprintf("S3 bucket %q does not exist", opts.Bucket),
				Hint: "create the bucket, or let the server create it (Options.CreateBucket)",
			}
		}
		err := client.MakeBucket(ctx, opts.Bucket, minio.MakeBucketOptions{Region: opts.Region})
		if err != nil && !isS3Code(err, "BucketAlreadyOwnedByYou") {
			return nil, s.error(ctx, err, "create bucket", opts.Bucket)
		}
	}
	return s, nil
}

// Close closes the idle connections of Options.Transport, when it has a
// CloseIdleConnections method. It never fails.
func (s *Store) Close() error {
	if t, ok := s.opts.Transport.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
	return nil
}

// Put implements blob.Store.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) (int64, error) {
	return s.put(ctx, key, r, size, false)
}

// PutIfAbsent implements blob.Store with S3's conditional write: the PUT, or
// the completion of a multipart upload, carries If-None-Match: *, which
// the store refuses (412) when the object exists.
func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (int64, error) {
	return s.put(ctx, key, r, size, true)
}

// put stores r under key; with absent, only if no object is there.
func (s *Store) put(ctx context.Context, key string, r io.Reader, size int64, absent bool) (int64, error) {
	if err := blob.ValidateKey(key); err != nil {
		return 0, err
	}
	if size < -1 {
		return 0, errs.Errorf(errs.Invalid, "invalid size %d (-1: unknown)", size)
	}
	body := blob.NewBodyReader(ctx, r, size)
	opts := minio.PutObjectOptions{ContentType: "application/octet-stream"}
	if absent {
		opts.SetMatchETagExcept("*") // If-None-Match: *
	}
	var n int64
	var err error
	if size >= 0 && size <= s.opts.PartSize {
		n, err = s.putObject(ctx, key, body, size, opts)
	} else {
		n, err = s.putMultipart(ctx, key, body, size, opts)
	}
	switch {
	case absent && isS3Code(err, "PreconditionFailed"):
		return 0, errs.Wrap(errs.AlreadyExists, err, fmt.Sprintf("blob %q already exists", blob.ClipKey(key)))
	case isS3Code(err, "ConditionalRequestConflict"):
		// Another conditional write to the key was in flight (AWS).
		return 0, errs.Wrap(errs.Unavailable, err, fmt.Sprintf("a concurrent write to blob %q; retry", blob.ClipKey(key)))
	}
	return n, err
}

// putObject stores a blob of known size with one streaming PUT. The body
// is not seekable, so minio-go does not retry it.
func (s *Store) putObject(ctx context.Context, key string, body io.Reader, size int64, opts minio.PutObjectOptions) (int64, error) {
	opts.DisableMultipart = true
	_, err := s.client.PutObject(ctx, s.bucket, s.object(key), body, size, opts)
	if err != nil {
		return 0, s.bodyError(ctx, err, body, "put", key)
	}
	return size, nil
}

// putMultipart uploads body as parts, PartConcurrency at a time, or with one
// PUT when it turns out to fit in the first part. On failure it aborts the
// upload (under a context that ctx's cancellation does not end).
func (s *Store) putMultipart(ctx context.Context, key string, body *blob.BodyReader, size int64, opts minio.PutObjectOptions) (n int64, err error) {
	// Buffers circulate: from the pool to a part upload, to free when the
	// upload returns, back to the pool when the Put ends. One that leaves
	// the circle (an error path) is left to the garbage collector, never
	// pooled twice.
	first := s.getBuf(s.partSize(size, 1))
	m, err := io.ReadFull(body, first)
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		n, err := s.putObject(ctx, key, bytes.NewReader(first[:m]), int64(m), opts)
		s.putBuf(first)
		return n, err
	case err != nil:
		s.putBuf(first)
		return 0, err
	}

	obj := s.object(key)
	// The upload is created under a context that ctx's cancellation does
	// not end: cancelled while the request was on its way, the server may
	// have created an upload whose ID the client never learnt, which no
	// abort could then remove. A cancelled ctx then fails the first part,
	// and the upload is aborted below.
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	uploadID, err := s.core.NewMultipartUpload(cctx, s.bucket, obj, minio.PutObjectOptions{ContentType: opts.ContentType})
	ccancel()
	if err != nil {
		return 0, s.error(ctx, err, "put", key)
	}
	upCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer func() {
		if err != nil {
			s.abort(ctx, obj, uploadID)
		}
	}()

	var (
		mu       sync.Mutex
		parts    []minio.CompletePart
		firstErr error
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		cancel()
	}
	free := make(chan []byte, s.opts.PartConcurrency)
	nbufs := 1
	buf, n := first, int64(m)
	for num := 1; ; num++ {
		if num > blob.MaxPartNumber {
			fail(errs.Errorf(errs.LimitExceeded, "blob %q is larger than %d parts; give its size to upload it with larger parts", blob.ClipKey(key), blob.MaxPartNumber))
			break
		}
		data := buf[:m]
		wg.Add(1)
		go func(num int, data []byte) {
			defer wg.Done()
			p, err := s.core.PutObjectPart(upCtx, s.bucket, obj, uploadID, num, bytes.NewReader(data), int64(len(data)), minio.PutObjectPartOptions{})
			free <- data[:cap(data)]
			if err != nil {
				fail(err)
				return
			}
			mu.Lock()
			parts = append(parts, minio.CompletePart{PartNumber: num, ETag: p.ETag})
			mu.Unlock()
		}(num, data)
		if m < len(buf) {
			break // the body ended within this part
		}

		// Next buffer: a free one, a new one while under PartConcurrency,
		// or wait for an upload to finish.
		want := s.partSize(size, num+1)
		select {
		case buf = <-free:
		default:
			if nbufs < s.opts.PartConcurrency {
				buf = s.getBuf(want)
				nbufs++
			} else {
				select {
				case buf = <-free:
				case <-upCtx.Done():
				}
			}
		}
		if upCtx.Err() != nil {
			break
		}
		if int64(cap(buf)) < want {
			buf = s.getBuf(want)
		}
		buf = buf[:want]
		m, err = io.ReadFull(body, buf)
		n += int64(m)
		if err == io.EOF {
			break
		}
		if err != nil && err != io.ErrUnexpectedEOF {
			fail(err)
			break
		}
	}
	wg.Wait()
	// Every upload has returned its buffer: keep them for the next Put.
	for len(free) > 0 {
		s.putBuf(<-free)
	}
	if firstErr != nil {
		return 0, s.bodyError(ctx, firstErr, body, "put", key)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("upload cancelled: %w", err)
	}
	slices.SortFunc(parts, func(a, b minio.CompletePart) int { return cmp.Compare(a.PartNumber, b.PartNumber) })
	// The condition (If-None-Match) goes with the completion, which is
	// when the object appears.
	if _, err := s.core.CompleteMultipartUpload(ctx, s.bucket, obj, uploadID, parts, opts); err != nil {
		return 0, s.error(ctx, err, "put", key)
	}
	return n, nil
}

// getBuf returns a buffer of n bytes, from the pool when n is PartSize.
func (s *Store) getBuf(n int64) []byte {
	if n == s.opts.PartSize {
		if b, ok := s.bufs.Get().(*[]byte); ok {
			return *b
		}
	}
	return make([]byte, n)
}

// putBuf returns a buffer of PartSize bytes to the pool (others are left
// to the garbage collector). The caller must not use b afterwards.
func (s *Store) putBuf(b []byte) {
	if int64(cap(b)) == s.opts.PartSize {
		b = b[:cap(b)]
		s.bufs.Put(&b)
	}
}

// partSize returns the size of part num of a Put of size bytes (-1:
// unknown).
func (s *Store) partSize(size int64, num int) int64 {
	if size >= 0 {
		return max(s.opts.PartSize, (size+blob.MaxPartNumber-1)/blob.MaxPartNumber)
	}
	return min(s.opts.PartSize<<((num-1)/2000), blob.MaxPartSize)
}

// abort drops a failed upload's parts, even when ctx was cancelled.
func (s *Store) abort(ctx context.Context, obj, uploadID string) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := s.core.AbortMultipartUpload(actx, s.bucket, obj, uploadID); err != nil && !isS3Code(err, "NoSuchUpload") {
		s.log.Warn("aborting a failed multipart upload failed; a bucket lifecycle rule should remove incomplete uploads",
			"object", obj, "upload", uploadID, "err", err)
	}
}

// Open implements blob.Store. The reader is the HTTP response body: nothing is
// buffered beyond the transport's.
func (s *Store) Open(ctx context.Context, key string, offset, length int64) (io.ReadCloser, blob.Info, error) {
	if err := blob.ValidateKey(key); err != nil {
		return nil, blob.Info{}, err
	}
	if err := blob.ValidateRange(offset, length); err != nil {
		return nil, blob.Info{}, err
	}
	if length == 0 {
		return s.openEmpty(ctx, key, offset, length)
	}
	var opts minio.GetObjectOptions
	ranged := offset > 0 || length > 0
	if ranged {
		if length > 0 {
			opts.Set("Range", fmt.Sprintf("bytes=%d-%d", offset, offset+length-1))
		} else {
			opts.Set("Range", fmt.Sprintf("bytes=%d-", offset))
		}
	}
	body, oi, hdr, err := s.core.GetObject(ctx, s.bucket, s.object(key), opts)
	if err != nil {
		if isS3Code(err, "InvalidRange") {
			return s.openEmpty(ctx, key, offset, length)
		}
		return nil, blob.Info{}, s.error(ctx, err, "open", key)
	}
	info := blob.Info{Key: key, Size: oi.Size, ModTime: oi.LastModified, ETag: oi.ETag}
	if ranged {
		total, ok := contentRangeTotal(hdr.Get("Content-Range"))
		if !ok {
			body.Close()
			return nil, blob.Info{}, errs.Errorf(errs.Internal, "open %q: S3 answered a range request without a usable Content-Range (%q)", blob.ClipKey(key), hdr.Get("Content-Range"))
		}
		info.Size = total
	}
	return body, info, nil
}

// openEmpty answers an Open whose range holds no byte: an empty reader if
// offset is within the blob (or at its end), errs.Invalid if past it.
func (s *Store) openEmpty(ctx context.Context, key string, offset, length int64) (io.ReadCloser, blob.Info, error) {
	info, err := s.Stat(ctx, key)
	if err != nil {
		return nil, blob.Info{}, err
	}
	if _, err := blob.ClampRange(key, offset, length, info.Size); err != nil {
		return nil, blob.Info{}, err
	}
	return io.NopCloser(strings.NewReader("")), info, nil
}

// contentRangeTotal returns the total of "bytes a-b/total".
func contentRangeTotal(h string) (int64, bool) {
	i := strings.LastIndexByte(h, '/')
	if i < 0 || !strings.HasPrefix(h, "bytes ") {
		return 0, false
	}
	n, err := strconv.ParseInt(h[i+1:], 10, 64)
	return n, err == nil && n >= 0
}

// Stat implements blob.Store.
func (s *Store) Stat(ctx context.Context, key string) (blob.Info, error) {
	if err := blob.ValidateKey(key); err != nil {
		return blob.Info{}, err
	}
	oi, err := s.client.StatObject(ctx, s.bucket, s.object(key), minio.StatObjectOptions{})
	if err != nil {
		return blob.Info{}, s.error(ctx, err, "stat", key)
	}
	return blob.Info{Key: key, Size: oi.Size, ModTime: oi.LastModified, ETag: oi.ETag}, nil
}

// List implements blob.Store. minio-go's page request (Core.ListObjectsV2) takes
// no context: ctx is checked between pages of up to 1000 names.
func (s *Store) List(ctx context.Context, prefix, after string, limit int) ([]blob.Entry, error) {
	if err := blob.ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	if err := blob.ValidateAfter(after); err != nil {
		return nil, err
	}
	full := s.prefix + prefix
	startAfter := ""
	if after != "" {
		startAfter = full + after
	}
	entries := []blob.Entry{}
	token := ""
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		maxKeys := 1000
		if limit > 0 {
			// One more: S3 may list the directory after ends with again.
			maxKeys = min(maxKeys, limit-len(entries)+1)
		}
		res, err := s.core.ListObjectsV2(s.bucket, full, startAfter, token, "/", maxKeys)
		if err != nil {
			return nil, s.error(ctx, err, "list", prefix)
		}
		// Each page holds the next names in key order, objects and
		// directories apart: merge them.
		page := make([]blob.Entry, 0, len(res.Contents)+len(res.CommonPrefixes))
		for _, o := range res.Contents {
			page = append(page, blob.Entry{Name: strings.TrimPrefix(o.Key, full), Size: o.Size, ModTime: o.LastModified})
		}
		for _, p := range res.CommonPrefixes {
			page = append(page, blob.Entry{Name: strings.TrimPrefix(p.Prefix, full), IsDir: true})
		}
		slices.SortFunc(page, func(a, b blob.Entry) int { return cmp.Compare(a.Name, b.Name) })
		for _, e := range page {
			name := strings.TrimSuffix(e.Name, "/")
			if e.Name <= after || name == "" || strings.Contains(name, "/") || blob.ValidateKey(name) != nil {
				continue // after itself again, or a key blob.Store could not have written
			}
			entries = append(entries, e)
			if limit > 0 && len(entries) == limit {
				return entries, nil
			}
		}
		if !res.IsTruncated || res.NextContinuationToken == "" {
			return entries, nil
		}
		token = res.NextContinuationToken
	}
}

// Delete implements blob.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := blob.ValidateKey(key); err != nil {
		return err
	}
	err := s.client.RemoveObject(ctx, s.bucket, s.object(key), minio.RemoveObjectOptions{})
	if err != nil && !isS3Code(err, "NoSuchKey") {
		return s.error(ctx, err, "delete", key)
	}
	return nil
}

// DeleteAll implements blob.Store. It lists the objects under prefix and
// deletes them in batches of 1000, as it goes.
func (s *Store) DeleteAll(ctx context.Context, prefix string) error {
	if err := blob.ValidatePrefix(prefix); err != nil {
		return err
	}
	if prefix == "" {
		return errs.E(errs.Invalid, "DeleteAll needs a non-empty prefix")
	}
	var listErr error
	objects := func(yield func(minio.ObjectInfo) bool) {
		for o := range s.client.ListObjectsIter(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true}) {
			if o.Err != nil {
				listErr = o.Err
				return
			}
			if !yield(o) {
				return
			}
		}
	}
	results, err := s.client.RemoveObjectsWithIter(ctx, s.bucket, objects, minio.RemoveObjectsOptions{})
	if err != nil {
		return s.error(ctx, err, "delete all", prefix)
	}
	var errList []error
	for r := range results {
		if r.Err != nil && !isS3Code(r.Err, "NoSuchKey") {
			errList = append(errList, r.Err)
		}
	}
	if listErr != nil {
		errList = append(errList, listErr)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(errList) > 0 {
		return s.error(ctx, errList[0], "delete all", prefix)
	}
	return nil
}

// object returns the object name of key.
func (s *Store) object(key string) string { return s.prefix + key }

// bodyError reports an upload's failure: the body's own error when it
// failed (a short body is the client's mistake, not the store's), else the
// mapped S3 error.
func (s *Store) bodyError(ctx context.Context, err error, body io.Reader, op, key string) error {
	if b, ok := body.(*blob.BodyReader); ok && b.Failure() != nil {
		return b.Failure()
	}
	return s.error(ctx, err, op, key)
}

// error maps an error of minio-go to an *errs.Error: missing objects and
// uploads to NotFound, refused arguments to Invalid, a full store to
// InsufficientStorage, throttling, server errors and network failures to
// Unavailable, anything else (bad credentials included) to Internal. An
// error that already is an *errs.Error, or that ctx caused, is returned as
// it is.
func (s *Store) error(ctx context.Context, err error, op, key string) error {
	if err == nil {
		return nil
	}
	var e *errs.Error
	if errors.As(err, &e) {
		return err
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%s %q: %w", op, blob.ClipKey(key), cerr)
	}
	var resp minio.ErrorResponse
	if errors.As(err, &resp) && (resp.Code != "" || resp.StatusCode != 0) {
		msg := fmt.Sprintf("%s %q: %s", op, blob.ClipKey(key), resp.Message)
		switch resp.Code {
		case "NoSuchKey", "NoSuchUpload", "NoSuchVersion":
			return errs.Wrap(errs.NotFound, err, fmt.Sprintf("%s %q: not found", op, blob.ClipKey(key)))
		case "NoSuchBucket":
			return &errs.Error{Code: errs.Internal, Msg: msg, Hint: fmt.Sprintf("the S3 bucket %q is gone; recreate it", s.bucket), Err: err}
		case "InvalidPart", "InvalidPartOrder", "EntityTooSmall", "EntityTooLarge", "InvalidRange",
			"InvalidArgument", "BadDigest", "InvalidDigest", "KeyTooLongError", "IncompleteBody":
			return errs.Wrap(errs.Invalid, err, msg)
		case "XMinioStorageFull", "XMinioAdminBucketQuotaExceeded", "QuotaExceeded":
			return &errs.Error{Code: errs.InsufficientStorage, Msg: "not enough storage space", Hint: "free space in the object store or raise its quota", Err: err}
		case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken":
			return &errs.Error{Code: errs.Internal, Msg: msg, Hint: "check the S3 credentials and their permissions on the bucket", Err: err}
		case "SlowDown", "ServiceUnavailable", "RequestTimeout", "InternalError", "XMinioServerNotInitialized", "RequestTimeTooSkewed":
			return errs.Wrap(errs.Unavailable, err, "blob storage is unavailable")
		}
		switch {
		case resp.StatusCode == http.StatusInsufficientStorage:
			return &errs.Error{Code: errs.InsufficientStorage, Msg: "not enough storage space", Hint: "free space in the object store or raise its quota", Err: err}
		case resp.StatusCode >= 500, resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode == http.StatusRequestTimeout:
			return errs.Wrap(errs.Unavailable, err, "blob storage is unavailable")
		case resp.StatusCode == http.StatusNotFound:
			return errs.Wrap(errs.NotFound, err, fmt.Sprintf("%s %q: not found", op, blob.ClipKey(key)))
		}
		return errs.Wrap(errs.Internal, err, msg)
	}
	var netErr net.Error
	if errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) {
		return errs.Wrap(errs.Unavailable, err, "blob storage is unavailable")
	}
	return errs.Wrap(errs.Internal, err, fmt.Sprintf("%s %q", op, blob.ClipKey(key)))
}

// isS3Code reports whether err is an S3 error response with the code.
func isS3Code(err error, code string) bool {
	var resp minio.ErrorResponse
	return errors.As(err, &resp) && resp.Code == code
}

var _ blob.Measurer = (*Store)(nil)

// Usage implements Measurer: the objects under the store's prefix, listed
// without a delimiter (1,000 a request).
func (s *Store) Usage(ctx context.Context) (blob.Usage, error) {
	var u blob.Usage
	for o := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix, Recursive: true}) {
		if o.Err != nil {
			return blob.Usage{}, s.error(ctx, o.Err, "measure", s.prefix)
		}
		u.Objects++
		u.Bytes += o.Size
	}
	return u, nil
}
