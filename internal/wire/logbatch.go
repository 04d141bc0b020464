package wire

import (
	"strconv"
	"unsafe"

	"github.com/sextant/sextant/internal/metrics"
	"github.com/sextant/sextant/internal/tracking"
)

// LogBatchRequest is the body of runs/log-batch.
type LogBatchRequest struct {
	RunID   string     `json:"run_id"`
	Metrics []MetricIn `json:"metrics,omitempty"`
	Params  []KVIn     `json:"params,omitempty"`
	Tags    []KVIn     `json:"tags,omitempty"`
}

// MetricIn is a metric as clients send it.
type MetricIn struct {
	Key           string `json:"key"`
	Value         Float  `json:"value"`
	Timestamp     Int    `json:"timestamp"`
	Step          Int    `json:"step"`
	DatasetName   string `json:"dataset_name"`
	DatasetDigest string `json:"dataset_digest"`
	ModelID       string `json:"model_id"`
	RunID         string `json:"run_id"`
}

// Domain returns the metric as tracking has it, or errs.Invalid naming
// the missing field, prefixed with list[i]. ("metrics[3].") when list is
// not empty. The prefix is made only for an error: a log-batch converts a
// thousand metrics.
func (m *MetricIn) Domain(list string, i int) (tracking.Metric, error) {
	missing := ""
	switch {
	case m.Key == "":
		missing = "key"
	case !m.Value.Set:
		missing = "value"
	case !m.Timestamp.Set:
		missing = "timestamp"
	}
	if missing != "" {
		prefix := ""
		if list != "" {
			prefix = list + "[" + strconv.Itoa(i) + "]."
		}
		return tracking.Metric{}, invalid("Missing value for required parameter '%s%s'. See the API docs for more information about request parameters.", prefix, missing)
	}
	return tracking.Metric{
		Key:   m.Key,
		Point: metrics.Point{Step: m.Step.V, TimestampMs: m.Timestamp.V, Value: m.Value.V},
		MetricContext: tracking.MetricContext{
			ModelID: m.ModelID, DatasetName: m.DatasetName, DatasetDigest: m.DatasetDigest,
		},
	}, nil
}

// KVIn is a param or tag of a log-batch request. Value is nil when
// the request has no value (absent or null), which is refused, as
// log-parameter and set-tag refuse it.
type KVIn struct {
	Key   string  `json:"key"`
	Value *string `json:"value"`
}

// DecodeLogBatch decodes a log-batch body. log-batch is the hot path of
// the server (a 1000-metric body per request, hundreds per second), and
// encoding/json's reflection costs more than everything else the request
// does, so the common shape is parsed by hand. Anything unusual (escapes,
// null, quoted numbers, NaN strings, unknown or differently cased fields,
// malformed JSON) falls back to the strict general decoder, which also
// writes the error messages. The fuzz test FuzzDecodeLogBatch checks that
// the two agree whenever the fast path succeeds. body must be valid UTF-8
// (httpapi's readBody checks). req must be zero but for a Metrics slice
// with capacity to reuse.
func DecodeLogBatch(body []byte, req *LogBatchRequest) error {
	p := batchParser{b: body}
	if p.parse(req) {
		return nil
	}
	*req = LogBatchRequest{}
	return Decode(body, req)
}

type batchParser struct {
	b    []byte
	i    int
	keys map[string]string // interned metric keys: a batch repeats a few keys many times
	// lastKey is the metric key read last (metricKey).
	lastKey string
}

func (p *batchParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (p *batchParser) peek() byte {
	p.ws()
	if p.i >= len(p.b) {
		return 0
	}
	return p.b[p.i]
}

func (p *batchParser) eat(c byte) bool {
	if p.peek() != c {
		return false
	}
	p.i++
	return true
}

// rawString returns the bytes of a JSON string without escapes; ok is
// false for anything else (including strings with escapes or control
// characters, which the general decoder handles).
func (p *batchParser) rawString() ([]byte, bool) {
	if p.peek() != '"' {
		return nil, false
	}
	start := p.i + 1
	for j := start; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			p.i = j + 1
			return p.b[start:j], true
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

func (p *batchParser) str() (string, bool) {
	s, ok := p.rawString()
	if !ok {
		return "", false
	}
	return string(s), true
}

// number returns the bytes of a JSON number, checked against the JSON
// grammar.
func (p *batchParser) number() ([]byte, bool) {
	p.ws()
	start, j := p.i, p.i
	b := p.b
	if j < len(b) && b[j] == '-' {
		j++
	}
	switch {
	case j < len(b) && b[j] == '0':
		j++
	case j < len(b) && b[j] >= '1' && b[j] <= '9':
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
	default:
		return nil, false
	}
	if j < len(b) && b[j] == '.' {
		j++
		if j >= len(b) || b[j] < '0' || b[j] > '9' {
			return nil, false
		}
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		if j >= len(b) || b[j] < '0' || b[j] > '9' {
			return nil, false
		}
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
	}
	p.i = j
	return b[start:j], true
}

// bytesString views b as a string without copying; the result must not
// outlive b or be retained.
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

func (p *batchParser) float() (Float, bool) {
	p.ws()
	start := p.i
	end, v, exact, ok := scanFloat(p.b, start)
	if !ok {
		return Float{}, false
	}
	p.i = end
	if !exact {
		var err error
		if v, err = strconv.ParseFloat(bytesString(p.b[start:end]), 64); err != nil {
			return Float{}, false // out of range: let the general decoder decide
		}
	}
	return Float{V: v, Set: true}, true
}

// exactPow10 are the powers of ten that a float64 holds exactly.
var exactPow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// scanFloat reads the JSON number at b[i:] (the grammar number checks)
// and returns where it ends. When its digits, taken as an integer m, are
// at most 2^53 and its decimal exponent e is within ±22, it also returns
// its value and exact = true: m and 10^|e| are then exact float64s, and
// one multiplication or division rounds m × 10^e correctly (Clinger's
// fast path). That is about half the values a client sends (the shortest
// repr of a float64 has 16 or 17 digits; most 16-digit ones fit), read in
// the one pass that finds the number's end, where strconv.ParseFloat's
// general digit loop cost 5% of the server's CPU under the ingestion
// benchmark. The caller hands the others to ParseFloat.
func scanFloat(b []byte, i int) (end int, v float64, exact, ok bool) {
	const maxExact = 1 << 53
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	var m uint64
	// sig counts significant digits (from the first non-zero one); past
	// 16 m may overflow and is no longer used.
	sig, exp := 0, 0
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			sig++
			m = m*10 + uint64(b[i]-'0')
		}
	default:
		return 0, 0, false, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return 0, 0, false, false
		}
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			if sig > 0 || b[i] != '0' {
				sig++
			}
			m = m*10 + uint64(b[i]-'0')
			exp--
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		eneg := false
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			eneg = b[i] == '-'
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return 0, 0, false, false
		}
		e := 0
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			if e < 1000 {
				e = e*10 + int(b[i]-'0')
			}
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	if sig > 16 || m > maxExact || exp < -22 || exp > 22 {
		return i, 0, false, true
	}
	v = float64(m)
	if exp < 0 {
		v /= exactPow10[-exp]
	} else {
		v *= exactPow10[exp]
	}
	if neg {
		v = -v
	}
	return i, v, true, true
}

func (p *batchParser) integer() (Int, bool) {
	n, ok := p.number()
	if !ok {
		return Int{}, false
	}
	if v, ok := smallInt(n); ok {
		return Int{V: v, Set: true}, true
	}
	v, err := strconv.ParseInt(bytesString(n), 10, 64)
	if err != nil {
		return Int{}, false // fractions, exponents, overflow
	}
	return Int{V: v, Set: true}, true
}

// smallInt reads a JSON number of at most 18 digits and no fraction or
// exponent, which cannot overflow an int64: every step and timestamp of a
// batch, two per point, at a third of strconv.ParseInt's cost. Other
// numbers return false and go to ParseInt.
func smallInt(n []byte) (int64, bool) {
	d := n
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 18 {
		return 0, false
	}
	var v int64
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if len(d) < len(n) {
		v = -v
	}
	return v, true
}

// object parses {"k": v, ...}, calling field for each key with the parser
// positioned at the value.
func (p *batchParser) object(field func(key []byte) bool) bool {
	if !p.eat('{') {
		return false
	}
	if p.eat('}') {
		return true
	}
	for {
		k, ok := p.rawString()
		if !ok || !p.eat(':') || !field(k) {
			return false
		}
		if p.eat(',') {
			continue
		}
		return p.eat('}')
	}
}

// array parses [v, ...], calling elem for each element.
func (p *batchParser) array(elem func() bool) bool {
	if !p.eat('[') {
		return false
	}
	if p.eat(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if p.eat(',') {
			continue
		}
		return p.eat(']')
	}
}

func (p *batchParser) parse(req *LogBatchRequest) bool {
	var seen [4]bool // encoding/json merges repeated arrays oddly: leave those to it
	once := func(i int) bool {
		if seen[i] {
			return false
		}
		seen[i] = true
		return true
	}
	ok := p.object(func(k []byte) bool {
		var ok bool
		switch string(k) {
		case "run_id":
			if once(0) {
				req.RunID, ok = p.str()
			}
		case "metrics":
			if !once(1) {
				return false
			}
			if cap(req.Metrics) < 1024 {
				req.Metrics = make([]MetricIn, 0, 1024)
			}
			req.Metrics = req.Metrics[:0] // a caller's pooled slice is reused
			ok = p.array(func() bool {
				req.Metrics = append(req.Metrics, MetricIn{})
				return p.metric(&req.Metrics[len(req.Metrics)-1])
			})
		case "params":
			if !once(2) {
				return false
			}
			ok = p.array(func() bool {
				req.Params = append(req.Params, KVIn{})
				return p.kv(&req.Params[len(req.Params)-1])
			})
		case "tags":
			if !once(3) {
				return false
			}
			ok = p.array(func() bool {
				req.Tags = append(req.Tags, KVIn{})
				return p.kv(&req.Tags[len(req.Tags)-1])
			})
		}
		return ok
	})
	p.ws()
	return ok && p.i == len(p.b)
}

func (p *batchParser) metric(m *MetricIn) bool {
	return p.object(func(k []byte) bool {
		var ok bool
		switch string(k) {
		case "key":
			m.Key, ok = p.metricKey()
		case "value":
			m.Value, ok = p.float()
		case "timestamp":
			m.Timestamp, ok = p.integer()
		case "step":
			m.Step, ok = p.integer()
		case "dataset_name":
			m.DatasetName, ok = p.str()
		case "dataset_digest":
			m.DatasetDigest, ok = p.str()
		case "model_id":
			m.ModelID, ok = p.str()
		case "run_id":
			m.RunID, ok = p.str()
		}
		return ok
	})
}

func (p *batchParser) kv(kv *KVIn) bool {
	return p.object(func(k []byte) bool {
		var ok bool
		switch string(k) {
		case "key":
			kv.Key, ok = p.str()
		case "value":
			var v string
			if v, ok = p.str(); ok {
				kv.Value = &v
			}
		}
		return ok
	})
}

// metricKey reads a metric's key. Clients send a key's steps one after
// another (a history logged at once, the ingestion benchmark's 100 steps
// a key) or a few keys in turn, so the key read last is tried first: when
// the body repeats it and its closing quote, it is that string, with no
// scan for escapes and no interning lookup (the two were about 5% of the
// server's CPU under the benchmark). The key read last came through
// rawString, so it holds no quote, backslash or control character.
func (p *batchParser) metricKey() (string, bool) {
	if last := p.lastKey; last != "" && p.peek() == '"' {
		end := p.i + 1 + len(last)
		if end < len(p.b) && p.b[end] == '"' && string(p.b[p.i+1:end]) == last {
			p.i = end + 1
			return last, true
		}
	}
	raw, ok := p.rawString()
	if !ok {
		return "", false
	}
	p.lastKey = p.intern(raw)
	return p.lastKey, true
}

func (p *batchParser) intern(b []byte) string {
	if p.keys == nil {
		p.keys = make(map[string]string, 16)
	}
	if s, ok := p.keys[string(b)]; ok {
		return s
	}
	s := string(b)
	p.keys[s] = s
	return s
}
