package wire

import "bytes"

// DecodeProgress decodes a progress request body. A thousand ranks each
// post one every few seconds, and encoding/json's reflection was an eighth
// of the server's CPU for them (go run ./bench progress), so the shape
// the Python sender writes is parsed by hand, as log-batch is
// (logbatch.go). Anything else (escapes, null, fractions where integers
// go, duplicate or unknown or differently cased fields, malformed JSON)
// falls back to the strict general decoder, which also writes the error
// messages; FuzzDecodeProgress checks that the two agree. body must be
// valid UTF-8 (httpapi's readBody checks).
//
// A req decoded before is reused: its reports' array and the array their
// values are in are kept for this body's reports (a thousand ranks' requests
// allocated them afresh each time: a seventh of the server's allocations,
// so of its garbage collection). Nothing of the last body's reports must
// be in use then.
func DecodeProgress(body []byte, req *ProgressRequest) error {
	p := batchParser{b: body}
	if p.progress(req) {
		return nil
	}
	*req = ProgressRequest{}
	return Decode(body, req)
}

func (p *batchParser) progress(req *ProgressRequest) bool {
	reports, vals := req.Reports[:0], req.vals[:0]
	*req = ProgressRequest{}
	defer func() { req.vals = vals }()
	var seen [3]bool
	ok := p.object(func(k []byte) bool {
		var ok bool
		switch string(k) {
		case "run_id":
			if !seen[0] {
				seen[0] = true
				req.RunID, ok = p.str()
			}
		case "node":
			if !seen[1] {
				seen[1] = true
				req.Node, ok = p.str()
			}
		case "reports":
			if !seen[2] {
				seen[2] = true
				// As encoding/json: [] is empty, not nil. Each report is an
				// object: counting braces sizes the arrays once (a bound, as
				// strings may hold braces; capped, as a body may be large).
				n := min(bytes.Count(p.b[p.i:], []byte{'{'}), 1024)
				if reports == nil || cap(reports) < n {
					reports = make([]ProgressReportJSON, 0, n)
				}
				if cap(vals) < n {
					vals = make([]progressValues, 0, n)
				}
				req.Reports = reports[:0]
				ok = p.array(func() bool {
					if len(vals) == cap(vals) { // past the cap: the reports before keep the full array
						vals = make([]progressValues, 0, 64)
					}
					vals = vals[:len(vals)+1]
					req.Reports = append(req.Reports, ProgressReportJSON{})
					return p.progressReport(&req.Reports[len(req.Reports)-1], &vals[len(vals)-1])
				})
			}
		}
		return ok
	})
	p.ws()
	return ok && p.i == len(p.b)
}

// progressValues holds the values a report's pointers point to, allocated
// 64 reports at a time instead of one allocation a field.
type progressValues struct {
	rank, gpu                           int
	step                                int64
	stepTime, dataWait, samples, tokens float64
}

// progressReport reads one report into r, its values into v. A loop, not
// batchParser.object with a closure: the closures cost allocations per
// report.
func (p *batchParser) progressReport(r *ProgressReportJSON, v *progressValues) bool {
	if !p.eat('{') {
		return false
	}
	if p.eat('}') {
		return true
	}
	var seen uint8
	for {
		k, ok := p.rawString()
		if !ok || !p.eat(':') {
			return false
		}
		var field uint8
		switch string(k) {
		case "rank":
			field = 1 << 0
		case "gpu":
			field = 1 << 1
		case "step":
			field = 1 << 2
		case "time_ms":
			field = 1 << 3
		case "step_time_s":
			field = 1 << 4
		case "data_wait_s":
			field = 1 << 5
		case "samples":
			field = 1 << 6
		case "tokens":
			field = 1 << 7
		default:
			return false // unknown or differently cased: the general decoder's rules apply
		}
		if seen&field != 0 {
			return false // a repeated field: likewise
		}
		seen |= field
		if field <= 1<<3 {
			n, ok := p.integer()
			if !ok {
				return false
			}
			switch field {
			case 1 << 0:
				v.rank = int(n.V)
				r.Rank = &v.rank
			case 1 << 1:
				v.gpu = int(n.V)
				r.GPU = &v.gpu
			case 1 << 2:
				v.step = n.V
				r.Step = &v.step
			default:
				r.TimeMs = n.V
			}
		} else {
			f, ok := p.float()
			if !ok {
				return false
			}
			switch field {
			case 1 << 4:
				v.stepTime = f.V
				r.StepTimeS = &v.stepTime
			case 1 << 5:
				v.dataWait = f.V
				r.DataWaitS = &v.dataWait
			case 1 << 6:
				v.samples = f.V
				r.Samples = &v.samples
			default:
				v.tokens = f.V
				r.Tokens = &v.tokens
			}
		}
		if p.eat(',') {
			continue
		}
		return p.eat('}')
	}
}
