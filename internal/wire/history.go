package wire

import (
	"slices"
	"strconv"

	"github.com/sextant/sextant/internal/tracking"
)

// A history point, as get-history and the bulk history routes answer it:
//
//	{"key":K,"value":V,"timestamp":T,"step":S[,"dataset_name":N][,"dataset_digest":D][,"model_id":M][,"run_id":R]}
//
// History responses are the largest the server writes (a 200,000-point
// history is about 15 MB), so they are built by hand into the caller's
// buffer, by two encoders of this one shape kept side by side:
// AppendHistoryPoint, one point at a time, and AppendHistory, a page of
// one series with its steps and timestamps formatted incrementally (float
// formatting and integer formatting were most of a page's cost).
// TestHistoryEncodersAgree holds them to the same bytes.

// AppendHistoryPoint appends one point of a history response, with its
// run's id when runID is set (the bulk routes), and returns the extended
// buffer.
func AppendHistoryPoint(dst []byte, key string, p *tracking.HistoryPoint, runID string) []byte {
	dst = append(dst, `{"key":`...)
	dst = AppendString(dst, key)
	dst = append(dst, `,"value":`...)
	dst = AppendFloat(dst, p.Value)
	dst = append(dst, `,"timestamp":`...)
	dst = strconv.AppendInt(dst, p.TimestampMs, 10)
	dst = append(dst, `,"step":`...)
	dst = strconv.AppendInt(dst, p.Step, 10)
	if c := p.Context; c != nil {
		dst = AppendContext(dst, c)
	}
	if runID != "" {
		dst = append(dst, `,"run_id":`...)
		dst = AppendString(dst, runID)
	}
	return append(dst, '}')
}

// AppendContext appends a point's context fields, each after a comma.
func AppendContext(dst []byte, c *tracking.MetricContext) []byte {
	if c.DatasetName != "" {
		dst = append(dst, `,"dataset_name":`...)
		dst = AppendString(dst, c.DatasetName)
	}
	if c.DatasetDigest != "" {
		dst = append(dst, `,"dataset_digest":`...)
		dst = AppendString(dst, c.DatasetDigest)
	}
	if c.ModelID != "" {
		dst = append(dst, `,"model_id":`...)
		dst = AppendString(dst, c.ModelID)
	}
	return dst
}

// HistoryPrefix returns what every point of key's history starts with,
// for AppendHistory: `{"key":K,"value":`.
func HistoryPrefix(key string) []byte {
	return append(AppendString([]byte(`{"key":`), key), `,"value":`...)
}

// AppendHistory appends hb.Points[from:to] as history points, each but
// the very first of hb preceded by a comma, and returns the extended
// buffer. prefix is HistoryPrefix of the series' key. It may run on
// several goroutines at once over disjoint ranges of one hb, which it
// only reads.
func AppendHistory(dst, prefix []byte, hb *tracking.HistoryBuffer, from, to int) []byte {
	// A point takes about 80 bytes; grow once.
	dst = slices.Grow(dst, (to-from)*(len(prefix)+64))
	var ts, step decimalCounter
	_, j := hb.ContextAt(from, 0)
	for i := from; i < to; i++ {
		p := &hb.Points[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, prefix...)
		dst = AppendFloat(dst, p.Value)
		dst = append(dst, `,"timestamp":`...)
		dst = ts.append(dst, p.TimestampMs)
		dst = append(dst, `,"step":`...)
		dst = step.append(dst, p.Step)
		var c *tracking.MetricContext
		if c, j = hb.ContextAt(i, j); c != nil {
			dst = AppendContext(dst, c)
		}
		dst = append(dst, '}')
	}
	return dst
}

// decimalCounter formats a sequence of integers that mostly grow by a
// little, as the steps and timestamps of a history do: it keeps the
// digits of the previous number and adds the difference to them digit by
// digit, which costs a fraction of formatting each number anew.
type decimalCounter struct {
	v      int64
	n      int // digits in use, at the end of digits; 0: none yet
	digits [20]byte
}

func (c *decimalCounter) append(dst []byte, v int64) []byte {
	// The common case: a step of 0 to 9 that carries no digit.
	if d := v - c.v; c.n > 0 && v >= c.v && d < 10 && c.digits[len(c.digits)-1]+byte(d) <= '9' {
		c.digits[len(c.digits)-1] += byte(d)
		c.v = v
		return append(dst, c.digits[len(c.digits)-c.n:]...)
	}
	return c.add(dst, v)
}

// add is append's general case.
func (c *decimalCounter) add(dst []byte, v int64) []byte {
	d := uint64(v - c.v)
	if c.n == 0 || v < c.v || v < 0 || d >= 1<<20 {
		return c.reset(dst, v)
	}
	c.v = v
	i := len(c.digits) - 1
	for carry := uint64(0); d > 0 || carry > 0; i-- {
		if i < len(c.digits)-c.n {
			if i < 0 {
				return c.reset(dst, v)
			}
			c.digits[i] = '0'
			c.n++
		}
		x := uint64(c.digits[i]-'0') + d%10 + carry
		d /= 10
		carry = x / 10
		c.digits[i] = byte('0' + x%10)
	}
	return append(dst, c.digits[len(c.digits)-c.n:]...)
}

func (c *decimalCounter) reset(dst []byte, v int64) []byte {
	start := len(dst)
	dst = strconv.AppendInt(dst, v, 10)
	c.v, c.n = v, 0
	if v >= 0 {
		c.n = len(dst) - start
		copy(c.digits[len(c.digits)-c.n:], dst[start:])
	}
	return dst
}
