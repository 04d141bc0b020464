package wire

// DecodeProgress decodes a progress request body. A thousand ranks each
// post one every few seconds, and encoding/json's reflection was an eighth
// of the server's CPU for them (go run ./bench progress), so the shape
// the Python sender writes is parsed by hand, as log-batch is
// (logbatch.go). Anything else (escapes, null, fractions where integers
// go, duplicate or unknown or differently cased fields, malformed JSON)
// falls back to the strict general decoder, which also writes the error
// messages; FuzzDecodeProgress checks that the two agree. body must be
// valid UTF-8 (httpapi's readBody checks).
func DecodeProgress(body []byte, req *ProgressRequest) error {
	p := batchParser{b: body}
	if p.progress(req) {
		return nil
	}
	*req = ProgressRequest{}
	return Decode(body, req)
}

func (p *batchParser) progress(req *ProgressRequest) bool {
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
				req.Reports = []ProgressReportJSON{} // as encoding/json: [] is empty, not nil
				ok = p.array(func() bool {
					req.Reports = append(req.Reports, ProgressReportJSON{})
					return p.progressReport(&req.Reports[len(req.Reports)-1])
				})
			}
		}
		return ok
	})
	p.ws()
	return ok && p.i == len(p.b)
}

// progressValues holds the values a report's pointers point to: one
// allocation a report instead of one a field.
type progressValues struct {
	rank, gpu                         int
	step                              int64
	stepTime, dataWait, samples, toks float64
}

func (p *batchParser) progressReport(r *ProgressReportJSON) bool {
	v := new(progressValues)
	var seen [8]bool
	once := func(i int) bool {
		if seen[i] {
			return false // a repeated field: the general decoder's rules apply
		}
		seen[i] = true
		return true
	}
	num := func(i int, dst *float64, field **float64) bool {
		if !once(i) {
			return false
		}
		f, ok := p.float()
		if !ok {
			return false
		}
		*dst = f.V
		*field = dst
		return true
	}
	return p.object(func(k []byte) bool {
		switch string(k) {
		case "rank":
			n, ok := p.integer()
			if !once(0) || !ok {
				return false
			}
			v.rank = int(n.V)
			r.Rank = &v.rank
		case "gpu":
			n, ok := p.integer()
			if !once(1) || !ok {
				return false
			}
			v.gpu = int(n.V)
			r.GPU = &v.gpu
		case "step":
			n, ok := p.integer()
			if !once(2) || !ok {
				return false
			}
			v.step = n.V
			r.Step = &v.step
		case "time_ms":
			n, ok := p.integer()
			if !once(3) || !ok {
				return false
			}
			r.TimeMs = n.V
		case "step_time_s":
			return num(4, &v.stepTime, &r.StepTimeS)
		case "data_wait_s":
			return num(5, &v.dataWait, &r.DataWaitS)
		case "samples":
			return num(6, &v.samples, &r.Samples)
		case "tokens":
			return num(7, &v.toks, &r.Tokens)
		default:
			return false
		}
		return true
	})
}
