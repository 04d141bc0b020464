package wire

import (
	"math"
	"strconv"

	"github.com/sextant/sextant/internal/gpu"
)

// The GPU wire format (docs/gpu.md): the agent's ingest request, the
// answer to it, and the latest-samples and series answers of the GPU pane.
// Readings are named by gpu.Field's names; a missing reading is null or
// absent on the way in and null on the way out. Memory is in bytes, power
// in watts, clocks in MHz, temperatures in °C, utilisation in percent. The
// agent's client (internal/client) sends AppendGPUBatch's encoding.

// GPUBatch is the body of POST /api/2.0/sextant/gpu/samples.
type GPUBatch struct {
	Node     string      `json:"node"`
	RunID    string      `json:"run_id"`
	NodeRank Int         `json:"node_rank"`
	NumNodes Int         `json:"num_nodes"`
	Samples  []GPUSample `json:"samples"`
}

// GPUSample is one sample of a GPUBatch: a node's GPUs at one instant.
type GPUSample struct {
	TsMs      Int          `json:"ts_ms"`
	GPUs      []GPU        `json:"gpus"`
	Processes []GPUProcess `json:"processes"`
}

// GPU is one GPU's readings in a GPUSample, by gpu.Field's names.
type GPU struct {
	Index      Int    `json:"index"`
	UUID       string `json:"uuid"`
	Name       string `json:"name"`
	Error      string `json:"error"`
	Util       Float  `json:"util"`
	MemUtil    Float  `json:"mem_util"`
	MemUsed    Float  `json:"mem_used"`
	MemTotal   Float  `json:"mem_total"`
	Temp       Float  `json:"temp"`
	Power      Float  `json:"power"`
	PowerLimit Float  `json:"power_limit"`
	SMClock    Float  `json:"sm_clock"`
	// Since version 2 of the sample format (issue 18).
	MemClock          Float `json:"mem_clock"`
	SMClockMax        Float `json:"sm_clock_max"`
	PowerLimitDefault Float `json:"power_limit_default"`
	ThrottleReasons   Float `json:"throttle_reasons"`
	ECCCorrected      Float `json:"ecc_corrected"`
	ECCUncorrected    Float `json:"ecc_uncorrected"`
	Xid               Float `json:"xid"`
}

// readings lists g's readings in gpu.Field order.
func (g *GPU) readings() [gpu.NumFields]Float {
	return [gpu.NumFields]Float{g.Util, g.MemUtil, g.MemUsed, g.MemTotal, g.Temp, g.Power, g.PowerLimit, g.SMClock,
		g.MemClock, g.SMClockMax, g.PowerLimitDefault, g.ThrottleReasons, g.ECCCorrected, g.ECCUncorrected, g.Xid}
}

// GPUProcess is a process using a GPU in a GPUSample.
type GPUProcess struct {
	GPU     Int    `json:"gpu"`
	PID     Int    `json:"pid"`
	Name    string `json:"name"`
	MemUsed Float  `json:"mem_used"`
}

// DecodeGPUBatch decodes an ingest request body. The shape the agent
// sends is parsed by hand, as log-batch is (logbatch.go): with a
// thousand nodes posting, encoding/json's reflection would cost more than
// storing the samples. Anything else goes to the strict general decoder,
// which also writes the error messages; FuzzDecodeGPUBatch checks that
// the two agree.
func DecodeGPUBatch(body []byte) (*gpu.Batch, error) {
	var req GPUBatch
	if !parseGPUBatch(body, &req) {
		req = GPUBatch{}
		if err := Decode(body, &req); err != nil {
			return nil, err
		}
	}
	return req.Batch()
}

// Batch returns the request as a gpu.Batch, or errs.Invalid naming the
// first field that is missing or out of range. Byte counts are rounded to
// whole bytes; out-of-range ones, NaN and infinities are missing readings.
func (req *GPUBatch) Batch() (*gpu.Batch, error) {
	if req.NumNodes.V < 0 || req.NumNodes.V > math.MaxInt32 {
		return nil, invalid("num_nodes must be between 0 and %d, got %d", math.MaxInt32, req.NumNodes.V)
	}
	b := &gpu.Batch{Labels: gpu.Labels{Node: req.Node, RunID: req.RunID, NodeRank: -1, NumNodes: int(req.NumNodes.V)}}
	if req.NodeRank.Set {
		if req.NodeRank.V < 0 || req.NodeRank.V > math.MaxInt32 {
			return nil, invalid("node_rank must be between 0 and %d, got %d", math.MaxInt32, req.NodeRank.V)
		}
		b.NodeRank = int(req.NodeRank.V)
	}
	b.Samples = make([]gpu.Sample, len(req.Samples))
	for i, ws := range req.Samples {
		if !ws.TsMs.Set {
			return nil, invalid("Missing value for required parameter 'samples[%d].ts_ms'", i)
		}
		smp := &b.Samples[i]
		smp.TimestampMs = ws.TsMs.V
		smp.GPUs = make([]gpu.GPU, len(ws.GPUs))
		for j, wg := range ws.GPUs {
			if !wg.Index.Set {
				return nil, invalid("Missing value for required parameter 'samples[%d].gpus[%d].index'", i, j)
			}
			if wg.Index.V < 0 || wg.Index.V > math.MaxInt32 {
				return nil, invalid("samples[%d].gpus[%d].index %d is out of range", i, j, wg.Index.V)
			}
			g := gpu.NewGPU(int(wg.Index.V), wg.UUID, wg.Name)
			g.Err = wg.Error
			for f, v := range wg.readings() {
				switch {
				case v.Huge:
					// No sensor reads 1e400: a sender's bug, which
					// storing it as missing would hide.
					return nil, invalid("Invalid value for parameter 'samples[%d].gpus[%d].%s': the number is beyond a float64's range; send null for a missing reading", i, j, gpu.Field(f))
				case !v.Set:
				case gpu.Field(f).IsInteger():
					// Counts, masks and codes are whole; out-of-range ones are missing.
					if v.V >= 0 && v.V < math.MaxInt64 {
						g.Values[f] = math.Round(v.V)
					}
				default:
					g.Values[f] = v.V // NaN and ±Inf are stored as missing
				}
			}
			smp.GPUs[j] = g
		}
		smp.Processes = make([]gpu.Process, 0, len(ws.Processes))
		for j, wp := range ws.Processes {
			if wp.GPU.V < 0 || wp.GPU.V > math.MaxInt32 || wp.PID.V < 0 || wp.PID.V > math.MaxInt32 {
				return nil, invalid("samples[%d].processes[%d]: gpu or pid out of range", i, j)
			}
			if wp.MemUsed.Huge {
				return nil, invalid("Invalid value for parameter 'samples[%d].processes[%d].mem_used': the number is beyond a float64's range; send null for a missing reading", i, j)
			}
			p := gpu.Process{GPU: int(wp.GPU.V), PID: int(wp.PID.V), Name: wp.Name, MemUsedBytes: -1}
			if wp.MemUsed.Set && !gpu.IsMissing(wp.MemUsed.V) && wp.MemUsed.V >= 0 && wp.MemUsed.V < math.MaxInt64 {
				p.MemUsedBytes = int64(wp.MemUsed.V)
			}
			smp.Processes = append(smp.Processes, p)
		}
	}
	return b, nil
}

// AppendGPUBatch appends an ingest request body.
func AppendGPUBatch(dst []byte, b *gpu.Batch) []byte {
	dst = append(dst, `{"node":`...)
	dst = AppendString(dst, b.Node)
	if b.RunID != "" {
		dst = append(dst, `,"run_id":`...)
		dst = AppendString(dst, b.RunID)
	}
	if b.NodeRank >= 0 {
		dst = append(dst, `,"node_rank":`...)
		dst = strconv.AppendInt(dst, int64(b.NodeRank), 10)
	}
	if b.NumNodes > 0 {
		dst = append(dst, `,"num_nodes":`...)
		dst = strconv.AppendInt(dst, int64(b.NumNodes), 10)
	}
	dst = append(dst, `,"samples":[`...)
	for i := range b.Samples {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendGPUSample(dst, &b.Samples[i], false)
	}
	return append(dst, "]}"...)
}

// appendGPUSample appends {"ts_ms":..,"gpus":[..],"processes":[..]};
// with nulls, missing readings are written as null rather than left out.
func appendGPUSample(dst []byte, smp *gpu.Sample, nulls bool) []byte {
	dst = append(dst, `{"ts_ms":`...)
	dst = strconv.AppendInt(dst, smp.TimestampMs, 10)
	dst = append(dst, `,"gpus":[`...)
	for i := range smp.GPUs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendGPU(dst, &smp.GPUs[i], nulls)
	}
	dst = append(dst, `],"processes":[`...)
	for i, p := range smp.Processes {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"gpu":`...)
		dst = strconv.AppendInt(dst, int64(p.GPU), 10)
		dst = append(dst, `,"pid":`...)
		dst = strconv.AppendInt(dst, int64(p.PID), 10)
		dst = append(dst, `,"name":`...)
		dst = AppendString(dst, p.Name)
		dst = append(dst, `,"mem_used":`...)
		if p.MemUsedBytes >= 0 {
			dst = strconv.AppendInt(dst, p.MemUsedBytes, 10)
		} else {
			dst = append(dst, "null"...)
		}
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}

func appendGPU(dst []byte, g *gpu.GPU, nulls bool) []byte {
	dst = append(dst, `{"index":`...)
	dst = strconv.AppendInt(dst, int64(g.Index), 10)
	dst = append(dst, `,"uuid":`...)
	dst = AppendString(dst, g.UUID)
	dst = append(dst, `,"name":`...)
	dst = AppendString(dst, g.Name)
	switch {
	case g.Err != "":
		dst = append(dst, `,"error":`...)
		dst = AppendString(dst, g.Err)
	case nulls:
		dst = append(dst, `,"error":null`...)
	}
	for f := range gpu.NumFields {
		v := g.Values[f]
		if gpu.IsMissing(v) && !nulls {
			continue
		}
		dst = append(dst, ',', '"')
		dst = append(dst, gpu.Field(f).String()...)
		dst = append(dst, '"', ':')
		dst = appendReading(dst, gpu.Field(f), v)
	}
	return append(dst, '}')
}

// appendReading appends a reading: null when missing, an integer for byte
// counts, otherwise the value rounded to 3 decimals (stored readings are
// float32, whose digits beyond that are noise).
func appendReading(dst []byte, f gpu.Field, v float64) []byte {
	switch {
	case gpu.IsMissing(v):
		return append(dst, "null"...)
	case f.IsInteger():
		return strconv.AppendInt(dst, int64(math.Round(v)), 10)
	}
	r := math.Round(v*1000) / 1000
	if math.IsInf(r, 0) || math.IsNaN(r) { // v*1000 overflowed
		r = v
	}
	return AppendFloat(dst, r)
}

// AppendGPUResult appends the answer to an ingest request.
func AppendGPUResult(dst []byte, res *gpu.SendResult) []byte {
	dst = append(dst, `{"accepted":`...)
	dst = strconv.AppendInt(dst, int64(res.Accepted), 10)
	if len(res.Skipped) > 0 {
		dst = append(dst, `,"skipped":[`...)
		for i, sk := range res.Skipped {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"ts_ms":`...)
			dst = strconv.AppendInt(dst, sk.TimestampMs, 10)
			dst = append(dst, `,"reason":`...)
			dst = AppendString(dst, sk.Reason)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if res.SystemMetricsErr != "" {
		dst = append(dst, `,"system_metrics_error":`...)
		dst = AppendString(dst, res.SystemMetricsErr)
	}
	return append(dst, '}')
}

// GPUResult decodes AppendGPUResult's output on the client.
type GPUResult struct {
	Accepted int `json:"accepted"`
	Skipped  []struct {
		TsMs   int64  `json:"ts_ms"`
		Reason string `json:"reason"`
	} `json:"skipped"`
	SystemMetricsError string `json:"system_metrics_error"`
}

// Domain returns the result as the gpu package has it.
func (w *GPUResult) Domain() *gpu.SendResult {
	res := &gpu.SendResult{Accepted: w.Accepted, SystemMetricsErr: w.SystemMetricsError}
	for _, sk := range w.Skipped {
		res.Skipped = append(res.Skipped, gpu.Skipped{TimestampMs: sk.TsMs, Reason: sk.Reason})
	}
	return res
}

// AppendGPULatest appends {"nodes":[{"node","run_id","node_rank","ts_ms",
// "gpus","processes"}]}; run_id and node_rank are null when unknown.
func AppendGPULatest(dst []byte, nodes []gpu.NodeSample) []byte {
	dst = append(dst, `{"nodes":[`...)
	for i := range nodes {
		ns := &nodes[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendGPULabels(append(dst, '{'), ns.Node, ns.RunID, ns.NodeRank)
		dst = append(dst, ',')
		s := appendGPUSample(nil, &ns.Sample, true)
		dst = append(dst, s[1:]...) // splice the sample's fields into this object
	}
	return append(dst, "]}"...)
}

func appendGPULabels(dst []byte, node, runID string, rank int) []byte {
	dst = append(dst, `"node":`...)
	dst = AppendString(dst, node)
	dst = append(dst, `,"run_id":`...)
	if runID != "" {
		dst = AppendString(dst, runID)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"node_rank":`...)
	if rank >= 0 {
		dst = strconv.AppendInt(dst, int64(rank), 10)
	} else {
		dst = append(dst, "null"...)
	}
	return dst
}

var aggNames = map[gpu.Agg]string{gpu.AggAvg: "avg", gpu.AggMin: "min", gpu.AggMax: "max", gpu.AggMinAvgMax: "minavgmax"}

// AppendGPUSeries appends a series response: per GPU, per field, an array
// of [ts_ms, value] points, or [ts_ms, min, avg, max] with agg=minavgmax.
func AppendGPUSeries(dst []byte, res *gpu.SeriesResult) []byte {
	dst = append(dst, `{"from_ms":`...)
	dst = strconv.AppendInt(dst, res.FromMs, 10)
	dst = append(dst, `,"to_ms":`...)
	dst = strconv.AppendInt(dst, res.ToMs, 10)
	dst = append(dst, `,"bucket_ms":`...)
	dst = strconv.AppendInt(dst, res.BucketMs, 10)
	dst = append(dst, `,"agg":`...)
	if res.BucketMs == 0 {
		dst = AppendString(dst, "raw")
	} else {
		dst = AppendString(dst, aggNames[res.Agg])
	}
	dst = append(dst, `,"fields":[`...)
	for i, f := range res.Fields {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendString(dst, f.String())
	}
	dst = append(dst, `],"gpus":[`...)
	three := res.BucketMs > 0 && res.Agg == gpu.AggMinAvgMax
	for i := range res.GPUs {
		gs := &res.GPUs[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendGPULabels(append(dst, '{'), gs.Node, gs.RunID, gs.NodeRank)
		dst = append(dst, `,"index":`...)
		dst = strconv.AppendInt(dst, int64(gs.Index), 10)
		dst = append(dst, `,"uuid":`...)
		dst = AppendString(dst, gs.UUID)
		dst = append(dst, `,"name":`...)
		dst = AppendString(dst, gs.Name)
		dst = append(dst, `,"series":{`...)
		for fi, f := range res.Fields {
			if fi > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, f.String())
			dst = append(dst, ":["...)
			for pi, p := range gs.Series[fi] {
				if pi > 0 {
					dst = append(dst, ',')
				}
				dst = append(dst, '[')
				dst = strconv.AppendInt(dst, p.TimestampMs, 10)
				if three {
					dst = appendReading(append(dst, ','), f, p.Min)
				}
				dst = appendReading(append(dst, ','), f, p.Value)
				if three {
					dst = appendReading(append(dst, ','), f, p.Max)
				}
				dst = append(dst, ']')
			}
			dst = append(dst, ']')
		}
		dst = append(dst, "}}"...)
	}
	return append(dst, "]}"...)
}

// AppendGPUSampleJSON appends smp as the JSON object the API uses for a
// sample, missing readings as null (`sextant agent --once` prints it).
func AppendGPUSampleJSON(dst []byte, smp *gpu.Sample) []byte {
	return appendGPUSample(dst, smp, true)
}

// parseGPUBatch is the fast path of DecodeGPUBatch; it reports false for
// anything it does not handle (escapes, quoted numbers, unknown or
// repeated fields, malformed JSON), leaving req to be reset.
func parseGPUBatch(body []byte, req *GPUBatch) bool {
	p := batchParser{b: body}
	var seen [5]bool
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
		case "node":
			if once(0) {
				req.Node, ok = p.str()
			}
		case "run_id":
			if once(1) {
				req.RunID, ok = p.str()
			}
		case "node_rank":
			if once(2) {
				req.NodeRank, ok = p.integer()
			}
		case "num_nodes":
			if once(3) {
				req.NumNodes, ok = p.integer()
			}
		case "samples":
			if once(4) {
				req.Samples = []GPUSample{} // as encoding/json: [] is empty, not nil
				ok = p.array(func() bool {
					req.Samples = append(req.Samples, GPUSample{})
					return p.gpuSample(&req.Samples[len(req.Samples)-1])
				})
			}
		}
		return ok
	})
	p.ws()
	return ok && p.i == len(p.b)
}

func (p *batchParser) gpuSample(s *GPUSample) bool {
	var seen [3]bool
	return p.object(func(k []byte) bool {
		var ok bool
		switch string(k) {
		case "ts_ms":
			if !seen[0] {
				seen[0] = true
				s.TsMs, ok = p.integer()
			}
		case "gpus":
			if !seen[1] {
				seen[1] = true
				s.GPUs = []GPU{}
				ok = p.array(func() bool {
					s.GPUs = append(s.GPUs, GPU{})
					return p.gpuReading(&s.GPUs[len(s.GPUs)-1])
				})
			}
		case "processes":
			if !seen[2] {
				seen[2] = true
				s.Processes = []GPUProcess{}
				ok = p.array(func() bool {
					s.Processes = append(s.Processes, GPUProcess{})
					return p.gpuProcess(&s.Processes[len(s.Processes)-1])
				})
			}
		}
		return ok
	})
}

func (p *batchParser) gpuReading(g *GPU) bool {
	return p.object(func(k []byte) bool {
		var ok bool
		switch string(k) {
		case "index":
			g.Index, ok = p.integer()
		case "uuid":
			g.UUID, ok = p.str()
		case "name":
			g.Name, ok = p.str()
		case "error":
			g.Error, ok = p.strOrNull()
		case "util":
			g.Util, ok = p.floatOrNull()
		case "mem_util":
			g.MemUtil, ok = p.floatOrNull()
		case "mem_used":
			g.MemUsed, ok = p.floatOrNull()
		case "mem_total":
			g.MemTotal, ok = p.floatOrNull()
		case "temp":
			g.Temp, ok = p.floatOrNull()
		case "power":
			g.Power, ok = p.floatOrNull()
		case "power_limit":
			g.PowerLimit, ok = p.floatOrNull()
		case "sm_clock":
			g.SMClock, ok = p.floatOrNull()
		case "mem_clock":
			g.MemClock, ok = p.floatOrNull()
		case "sm_clock_max":
			g.SMClockMax, ok = p.floatOrNull()
		case "power_limit_default":
			g.PowerLimitDefault, ok = p.floatOrNull()
		case "throttle_reasons":
			g.ThrottleReasons, ok = p.floatOrNull()
		case "ecc_corrected":
			g.ECCCorrected, ok = p.floatOrNull()
		case "ecc_uncorrected":
			g.ECCUncorrected, ok = p.floatOrNull()
		case "xid":
			g.Xid, ok = p.floatOrNull()
		}
		return ok
	})
}

func (p *batchParser) gpuProcess(pr *GPUProcess) bool {
	return p.object(func(k []byte) bool {
		var ok bool
		switch string(k) {
		case "gpu":
			pr.GPU, ok = p.integer()
		case "pid":
			pr.PID, ok = p.integer()
		case "name":
			pr.Name, ok = p.str()
		case "mem_used":
			pr.MemUsed, ok = p.floatOrNull()
		}
		return ok
	})
}

// strOrNull parses a string, or null (empty), as encoding/json does.
func (p *batchParser) strOrNull() (string, bool) {
	if p.null() {
		return "", true
	}
	return p.str()
}

// null consumes a JSON null.
func (p *batchParser) null() bool {
	if p.peek() == 'n' && len(p.b)-p.i >= 4 && string(p.b[p.i:p.i+4]) == "null" {
		p.i += 4
		return true
	}
	return false
}

// floatOrNull parses a number, or null (not set), as Float does.
func (p *batchParser) floatOrNull() (Float, bool) {
	if p.null() {
		return Float{}, true
	}
	return p.float()
}
