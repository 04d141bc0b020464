package wire

import (
	"math"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/sextant/sextant/internal/gpu"
)

// FuzzDecodeGPUBatch checks that no ingest body makes the decoder panic,
// and that what it accepts survives the agent's encoder unchanged but for
// the encoder's rounding of readings to 3 decimals.
func FuzzDecodeGPUBatch(f *testing.F) {
	f.Add([]byte(`{"node":"n","run_id":"abc","node_rank":1,"num_nodes":2,"samples":[{"ts_ms":1,"gpus":[{"index":0,"uuid":"GPU-1","util":"NaN","mem_used":1e9,"temp":null,"error":"x"}],"processes":[{"gpu":0,"pid":7,"name":"py","mem_used":5}]}]}`))
	f.Add([]byte(`{"node":"n","samples":[{"ts_ms":"17","gpus":[{"index":"3","power":"-Infinity","sm_clock":1.5e308}]}]}`))
	f.Add([]byte(`"{\"node\":\"n\"}"`))
	f.Add(AppendGPUBatch(nil, &gpu.Batch{Labels: gpu.Labels{Node: "n", NodeRank: 2}, Samples: []gpu.Sample{{TimestampMs: 5, GPUs: []gpu.GPU{gpu.NewGPU(1, "GPU-x", "H100")}, Processes: []gpu.Process{{GPU: 1, PID: 3, MemUsedBytes: -1}}}}}))
	f.Fuzz(func(t *testing.T, body []byte) {
		if !utf8.Valid(body) {
			return // readBody refuses it before decoding
		}
		// Where the fast path accepts a body, the strict decoder must
		// read the same request from it.
		var fast, strict GPUBatch
		if parseGPUBatch(body, &fast) {
			if err := Decode(body, &strict); err != nil {
				t.Fatalf("fast path accepted what the strict decoder refuses (%v): %s", err, body)
			}
			if !reflect.DeepEqual(fast, strict) {
				t.Fatalf("decoders disagree on %s:\nfast   %+v\nstrict %+v", body, fast, strict)
			}
		}
		// For any body, DecodeGPUBatch and encoding/json followed by the
		// same conversion give the same batch or the same error.
		b, err := DecodeGPUBatch(body)
		var w GPUBatch
		var want *gpu.Batch
		werr := Decode(body, &w)
		if werr == nil {
			want, werr = w.Batch()
		}
		if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() {
			t.Fatalf("on %s DecodeGPUBatch says %v, encoding/json %v", body, err, werr)
		}
		if err != nil {
			return
		}
		if g, w := AppendGPUBatch(nil, b), AppendGPUBatch(nil, want); string(g) != string(w) {
			t.Fatalf("decoders disagree on %s:\n%s\n%s", body, g, w)
		}
		again, err := DecodeGPUBatch(AppendGPUBatch(nil, b))
		if err != nil {
			t.Fatalf("re-encoded batch refused: %v\n%s", err, AppendGPUBatch(nil, b))
		}
		if again.Labels != b.Labels || len(again.Samples) != len(b.Samples) {
			t.Fatalf("labels or sample count changed: %+v vs %+v", again.Labels, b.Labels)
		}
		for i := range b.Samples {
			x, y := b.Samples[i], again.Samples[i]
			if x.TimestampMs != y.TimestampMs || len(x.GPUs) != len(y.GPUs) || len(x.Processes) != len(y.Processes) {
				t.Fatalf("sample %d changed", i)
			}
			for j := range x.GPUs {
				for f := range gpu.NumFields {
					// The encoder sends readings rounded to 3 decimals.
					a, c := x.GPUs[j].Values[f], y.GPUs[j].Values[f]
					if r := math.Round(a*1000) / 1000; !gpu.Field(f).IsInteger() && !math.IsInf(r, 0) && !math.IsNaN(r) {
						a = r
					}
					if gpu.IsMissing(a) != gpu.IsMissing(c) || (!gpu.IsMissing(a) && a != c) {
						t.Fatalf("sample %d GPU %d %s: %v became %v", i, j, gpu.Field(f), a, c)
					}
				}
			}
			for j := range x.Processes {
				if x.Processes[j] != y.Processes[j] {
					t.Fatalf("process %+v became %+v", x.Processes[j], y.Processes[j])
				}
			}
		}
	})
}
