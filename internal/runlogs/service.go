package runlogs

import (
	"context"
	"log/slog"
	"math"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/tracking"
)

// Options configure a Service.
type Options struct {
	// Limits are the enforced caps; zero fields take their defaults.
	Limits Limits
	// PollInterval is how often a waiting tail reads the store for new
	// lines; 0 means 250 ms. Tails read the store, never a replica's
	// memory, so a tail served by one replica sees lines that another
	// stored within this interval. Appends through this Service wake its
	// tails at once.
	PollInterval time.Duration
	// MaxWait caps how long one tail request waits for lines; 0 means 25 s
	// (below the idle timeouts of common proxies).
	MaxWait time.Duration
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
}

// Service applies the run-log rules on top of a Store. It is safe for
// concurrent use.
type Service struct {
	store  Store
	limits Limits
	poll   time.Duration
	wait   time.Duration
	log    *slog.Logger

	mu      sync.Mutex
	waiters map[string]chan struct{}
	closed  chan struct{}
	once    sync.Once
}

// NewService returns a Service over store.
func NewService(store Store, opts Options) *Service {
	s := &Service{
		store:   store,
		limits:  opts.Limits.WithDefaults(),
		poll:    opts.PollInterval,
		wait:    opts.MaxWait,
		log:     opts.Logger,
		waiters: map[string]chan struct{}{},
		closed:  make(chan struct{}),
	}
	if s.poll <= 0 {
		s.poll = 250 * time.Millisecond
	}
	if s.wait <= 0 {
		s.wait = 25 * time.Second
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// Limits returns the limits in force.
func (s *Service) Limits() Limits { return s.limits }

// MaxWait returns the longest a tail waits.
func (s *Service) MaxWait() time.Duration { return s.wait }

// Close ends every waiting tail (they return what they have) and makes
// later tails return at once. The server calls it when it shuts down, so
// that long polls do not hold the shutdown up.
func (s *Service) Close() { s.once.Do(func() { close(s.closed) }) }

// Done returns a channel that is closed once Close has been called;
// streaming tails stop on it.
func (s *Service) Done() <-chan struct{} { return s.closed }

// Append validates a batch and stores it.
func (s *Service) Append(ctx context.Context, runID string, b Batch) (AppendResult, error) {
	if err := tracking.ValidateRunID(runID); err != nil {
		return AppendResult{}, err
	}
	if err := s.validateBatch(&b); err != nil {
		return AppendResult{}, err
	}
	res, err := s.store.AppendLines(ctx, runID, b)
	if err != nil {
		return res, err
	}
	if res.Stored > 0 {
		s.wake(runID)
	}
	return res, nil
}

func (s *Service) validateBatch(b *Batch) error {
	l := s.limits
	switch {
	case b.Source == "":
		return errs.E(errs.Invalid, "Missing value for required parameter 'source'")
	case len(b.Source) > l.SourceLength:
		return errs.Errorf(errs.Invalid, "source has %d bytes, which exceeds the limit of %d", len(b.Source), l.SourceLength)
	case !printableASCII(b.Source):
		return errs.E(errs.Invalid, "source must be printable ASCII")
	case b.FirstSeq < 0:
		return errs.Errorf(errs.Invalid, "first_seq must not be negative, got %d", b.FirstSeq)
	case len(b.Lines) > l.BatchLines:
		return errs.Errorf(errs.LimitExceeded, "limit exceeded: an append request can contain at most %d lines, got %d", l.BatchLines, len(b.Lines))
	case b.FirstSeq > math.MaxInt64-int64(len(b.Lines)):
		return errs.Errorf(errs.Invalid, "first_seq %d is too large", b.FirstSeq)
	}
	for i := range b.Lines {
		ln := &b.Lines[i]
		switch {
		case ln.Stream != Stdout && ln.Stream != Stderr:
			return errs.Errorf(errs.Invalid, "lines[%d].stream must be stdout or stderr", i)
		case ln.Node < 0:
			return errs.Errorf(errs.Invalid, "lines[%d].node must not be negative, got %d", i, ln.Node)
		case ln.LocalRank < UnknownRank:
			return errs.Errorf(errs.Invalid, "lines[%d].local_rank must be -1 (unknown) or more, got %d", i, ln.LocalRank)
		case ln.TimestampMs < 0:
			return errs.Errorf(errs.Invalid, "lines[%d].timestamp must not be negative, got %d", i, ln.TimestampMs)
		case ln.Flags&^flagsKnown != 0:
			return errs.Errorf(errs.Invalid, "lines[%d] has unknown flags %d", i, ln.Flags)
		case len(ln.Text) > l.LineBytes:
			return errs.Errorf(errs.LimitExceeded, "limit exceeded: lines[%d].text has %d bytes, the maximum is %d (cut longer lines into records flagged partial)", i, len(ln.Text), l.LineBytes)
		case !utf8.ValidString(ln.Text):
			return errs.Errorf(errs.Invalid, "lines[%d].text is not valid UTF-8", i)
		}
	}
	return nil
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// Query selects lines of a run's log. Zero fields select everything.
type Query struct {
	RunID string
	// FromLine is the first line to consider; values below 1 mean 1.
	FromLine int64
	// Limit caps the lines returned; 0 means 1000, and it may not exceed
	// Limits.PageLines.
	Limit int
	// Node, when set, keeps the lines of that node rank.
	Node *int32
	// Stream, when not 0, keeps the lines of that stream.
	Stream Stream
	// SinceMs, when above 0, keeps lines with TimestampMs >= SinceMs.
	SinceMs int64
	// Contains keeps lines whose text contains it; Regexp (RE2 syntax)
	// keeps lines whose text matches it. At most one may be set.
	Contains string
	Regexp   string
}

func (q *Query) filtered() bool {
	return q.Node != nil || q.Stream != 0 || q.SinceMs > 0 || q.Contains != "" || q.Regexp != ""
}

// Page is the answer to a read, search or tail.
type Page struct {
	// Lines are the selected lines, in line order.
	Lines []Line
	// NextLine is where to go on: the first line not yet considered. A
	// filtered read stops early once it has scanned Limits.ScanBytes of
	// text, with fewer than Limit lines; its NextLine says where it
	// stopped.
	NextLine int64
	// Head is the log's state when the page was read.
	Head Head
}

// Done reports whether the page reached the end of the stored log.
func (p *Page) Done() bool { return p.NextLine >= p.Head.NextLine }

// matcher is a compiled Query filter.
type matcher struct {
	node     *int32
	stream   Stream
	sinceMs  int64
	contains string
	re       *regexp.Regexp
}

func (m *matcher) match(l *Line) bool {
	switch {
	case m.node != nil && l.Node != *m.node:
		return false
	case m.stream != 0 && l.Stream != m.stream:
		return false
	case l.TimestampMs < m.sinceMs:
		return false
	case m.contains != "" && !strings.Contains(l.Text, m.contains):
		return false
	case m.re != nil && !m.re.MatchString(l.Text):
		return false
	}
	return true
}

func (s *Service) compile(q *Query) (*matcher, int, error) {
	if err := tracking.ValidateRunID(q.RunID); err != nil {
		return nil, 0, err
	}
	limit := q.Limit
	switch {
	case limit == 0:
		limit = 1000
	case limit < 0 || limit > s.limits.PageLines:
		return nil, 0, errs.Errorf(errs.Invalid, "limit must be between 1 and %d, got %d", s.limits.PageLines, limit)
	}
	m := &matcher{node: q.Node, stream: q.Stream, sinceMs: q.SinceMs, contains: q.Contains}
	if q.Stream != 0 && q.Stream != Stdout && q.Stream != Stderr {
		return nil, 0, errs.E(errs.Invalid, "stream must be stdout or stderr")
	}
	if q.Node != nil && *q.Node < 0 {
		return nil, 0, errs.Errorf(errs.Invalid, "node must not be negative, got %d", *q.Node)
	}
	if q.Contains != "" && q.Regexp != "" {
		return nil, 0, errs.E(errs.Invalid, "give either q (a substring) or regex, not both")
	}
	for _, p := range []string{q.Contains, q.Regexp} {
		if len(p) > s.limits.PatternLength {
			return nil, 0, errs.Errorf(errs.Invalid, "search pattern has %d bytes, which exceeds the limit of %d", len(p), s.limits.PatternLength)
		}
	}
	if q.Regexp != "" {
		re, err := regexp.Compile(q.Regexp)
		if err != nil {
			return nil, 0, errs.Wrap(errs.Invalid, err, "invalid regular expression: "+strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		}
		m.re = re
	}
	return m, limit, nil
}

// Read returns up to q.Limit lines selected by q, from q.FromLine on. An
// unfiltered read returns exactly the lines FromLine to FromLine+Limit-1
// that exist; a filtered one (a search) scans at most Limits.ScanBytes of
// text per call.
func (s *Service) Read(ctx context.Context, q Query) (Page, error) {
	m, limit, err := s.compile(&q)
	if err != nil {
		return Page{}, err
	}
	return s.read(ctx, &q, m, limit)
}

func (s *Service) read(ctx context.Context, q *Query, m *matcher, limit int) (Page, error) {
	from := max(q.FromLine, 1)
	filtered := q.filtered()
	cq := ChunkQuery{MaxChunks: 2, SinceMs: q.SinceMs}
	if filtered {
		// Searches read more chunks per round trip and decode them in
		// parallel.
		cq.MaxChunks = 4 * runtime.GOMAXPROCS(0)
	}
	if q.Node != nil {
		cq.Nodes = NodeBit(*q.Node)
	}
	if q.Stream != 0 {
		cq.Streams = StreamBit(q.Stream)
	}
	page := Page{NextLine: from}
	var scanned int64
	for {
		cq.FromLine = from
		head, chunks, err := s.store.ReadChunks(ctx, q.RunID, cq)
		if err != nil {
			return Page{}, err
		}
		page.Head = head
		decoded, err := decodeChunks(chunks)
		if err != nil {
			return Page{}, errs.Wrap(errs.Internal, err, "stored log data is corrupt")
		}
		for ci, lines := range decoded {
			for i := range lines {
				l := &lines[i]
				if l.Number < from {
					continue
				}
				if m.match(l) {
					page.Lines = append(page.Lines, *l)
					if len(page.Lines) == limit {
						page.NextLine = l.Number + 1
						return page, nil
					}
				}
			}
			c := &chunks[ci]
			from = c.FirstLine + int64(c.Count)
			scanned += c.RawBytes
		}
		page.NextLine = max(from, page.NextLine)
		if len(chunks) < cq.MaxChunks {
			// The end of the log: everything up to the head was considered
			// (chunks skipped by the sets hold no selected line).
			page.NextLine = max(from, head.NextLine)
			return page, nil
		}
		if filtered && scanned >= s.limits.ScanBytes {
			return page, nil
		}
		if err := ctx.Err(); err != nil {
			return Page{}, err
		}
	}
}

// decodeChunks decodes chunks, several at once when there are many.
func decodeChunks(chunks []Chunk) ([][]Line, error) {
	out := make([][]Line, len(chunks))
	if len(chunks) <= 2 {
		for i := range chunks {
			var err error
			if out[i], err = DecodeChunk(nil, chunks[i].Data, chunks[i].FirstLine); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	errc := make([]error, len(chunks))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i := range chunks {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i], errc[i] = DecodeChunk(make([]Line, 0, chunks[i].Count), chunks[i].Data, chunks[i].FirstLine)
		})
	}
	wg.Wait()
	for _, err := range errc {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Tail returns the lines selected by q from q.FromLine on, waiting up to
// wait (capped at Options.MaxWait) for the first one to be stored. It
// returns at once, possibly with no lines, when the run has ended (its
// status is terminal) and nothing is left to read, when ctx is cancelled
// or when the Service is closed.
func (s *Service) Tail(ctx context.Context, q Query, wait time.Duration) (Page, error) {
	m, limit, err := s.compile(&q)
	if err != nil {
		return Page{}, err
	}
	wait = min(max(wait, 0), s.wait)
	deadline := time.Now().Add(wait)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		// Take the wake-up channel before reading, so that an append that
		// lands between the read and the wait still wakes us.
		woken := s.waiter(q.RunID)
		page, err := s.read(ctx, &q, m, limit)
		if err != nil {
			return Page{}, err
		}
		left := time.Until(deadline)
		if len(page.Lines) > 0 || left <= 0 || (page.Head.RunStatus.Terminal() && page.Done()) {
			return page, nil
		}
		q.FromLine = page.NextLine
		timer.Reset(min(s.poll, left))
		select {
		case <-woken:
			timer.Stop() // since Go 1.23 a stopped timer delivers no stale tick
		case <-timer.C:
		case <-ctx.Done():
			return page, nil
		case <-s.closed:
			return page, nil
		}
	}
}

// waiter returns a channel that is closed at the next append to runID
// through this Service.
func (s *Service) waiter(runID string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.waiters[runID]
	if ch == nil {
		ch = make(chan struct{})
		s.waiters[runID] = ch
	}
	return ch
}

func (s *Service) wake(runID string) {
	s.mu.Lock()
	ch := s.waiters[runID]
	delete(s.waiters, runID)
	s.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}
