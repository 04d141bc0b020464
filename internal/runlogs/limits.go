package runlogs

import (
	"github.com/sextant/sextant/internal/errs"
)

// Limits are the caps on run logs. Every field is documented for users in
// docs/limits.md; keep the two in step. A value of 0 or less means "use the
// default", never "unlimited".
type Limits struct {
	// LinesPerRun caps the stored lines of a run, every node counted.
	LinesPerRun int64
	// BytesPerRun caps the stored text of a run, in bytes.
	BytesPerRun int64
	// LineBytes caps the text of one record, in bytes; launchers cut longer
	// lines into several records (FlagPartial).
	LineBytes int
	// BatchLines caps the lines of one append request.
	BatchLines int
	// PageLines caps the lines one read, search or tail returns.
	PageLines int
	// ScanBytes bounds the work of one filtered read or search: it stops
	// after decoding this many bytes of text and returns a cursor to go on.
	ScanBytes int64
	// PatternLength caps a search substring or regular expression, in bytes.
	PatternLength int
	// SourceLength caps a batch's source id, in bytes.
	SourceLength int
}

// DefaultLimits returns the limits Sextant ships with.
func DefaultLimits() Limits {
	return Limits{
		LinesPerRun:   20_000_000,
		BytesPerRun:   4 << 30,
		LineBytes:     MaxLineBytes,
		BatchLines:    100_000,
		PageLines:     10_000,
		ScanBytes:     128 << 20,
		PatternLength: 1000,
		SourceLength:  128,
	}
}

// MaxLineBytes is the default cap on one record's text: 1 MiB.
const MaxLineBytes = 1 << 20

// WithDefaults returns l with every unset (zero or negative) field taken
// from DefaultLimits.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	set := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	set64 := func(v *int64, def int64) {
		if *v <= 0 {
			*v = def
		}
	}
	set64(&l.LinesPerRun, d.LinesPerRun)
	set64(&l.BytesPerRun, d.BytesPerRun)
	set(&l.LineBytes, d.LineBytes)
	set(&l.BatchLines, d.BatchLines)
	set(&l.PageLines, d.PageLines)
	set64(&l.ScanBytes, d.ScanBytes)
	set(&l.PatternLength, d.PatternLength)
	set(&l.SourceLength, d.SourceLength)
	return l
}

// CheckRun decides whether storing addLines lines of addBytes bytes on a
// run that holds haveLines lines of haveBytes bytes stays within the
// per-run limits; a store calls it inside the transaction that appends.
func (l Limits) CheckRun(haveLines, addLines, haveBytes, addBytes int64) error {
	if haveLines+addLines > l.LinesPerRun {
		return LimitError("log lines per run", haveLines, addLines, l.LinesPerRun)
	}
	if haveBytes+addBytes > l.BytesPerRun {
		return LimitError("log bytes per run", haveBytes, addBytes, l.BytesPerRun)
	}
	return nil
}

// LimitError returns the error for a breached per-run log limit. The
// message names the limit, the current amount and the maximum.
func LimitError(limit string, current, adding, max int64) error {
	return errs.RunLimit(limit, current, adding, max, "the launcher keeps showing the output but stores no more of it; print less, or start a new run")
}

// RunDeleted is the error for reading the log of a deleted run.
func RunDeleted(runID string) error {
	return &errs.Error{Code: errs.NotFound, Msg: "Run with id=" + runID + " is deleted: its log cannot be read", Hint: "restore the run to read its log"}
}
