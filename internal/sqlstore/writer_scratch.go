package sqlstore

import "slices"

// writeScratch is memory the writer's statements reuse from one request
// to the next: argument lists, query texts and the series rows of a
// request. Under a thousand ranks' progress (go run ./bench progress) the
// writer's fresh ones were most of the server's allocations left. Only
// the writer's goroutine touches it: every wtx runs there (the compactor
// writes through the writer too).
type writeScratch struct {
	args  []any
	texts map[textKey]string
	// keys, rows and state are loadSeriesRows'.
	keys  []string
	rows  []seriesRow
	state map[string]*seriesRow
	// sums holds insertChunks' summary blobs.
	sums []byte
}

// textKey names a multi-row statement's text for a number of rows.
type textKey struct {
	kind uint8
	rows int
}

// The statements whose texts the writer keeps (writeScratch.texts).
const (
	textLoadSeries uint8 = iota + 1
	textInsertChunks
	textUpdateSeries
)

// maxTexts bounds the texts kept: one per statement and row count.
const maxTexts = 256

// args returns an empty argument list with room for n; give it back with
// doneArgs once the statement has run (the driver has read it by then).
func (t *wtx) args(n int) []any { return slices.Grow(t.w.scratch.args[:0], n) }

// doneArgs drops a's values (the request's strings and buffers) and keeps
// its array for the next statement.
func (t *wtx) doneArgs(a []any) {
	clear(a)
	t.w.scratch.args = a[:0]
}

// text returns the text of statement kind for rows rows, built by build
// the first time: building the text for every request was a string or
// two per statement.
func (t *wtx) text(kind uint8, rows int, build func() string) string {
	sc := &t.w.scratch
	k := textKey{kind, rows}
	if q, ok := sc.texts[k]; ok {
		return q
	}
	q := build()
	if sc.texts == nil {
		sc.texts = map[textKey]string{}
	}
	if len(sc.texts) < maxTexts {
		sc.texts[k] = q
	}
	return q
}
