package gpu_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sextant/sextant/internal/gpu"
)

// v1Sample is what testdata/sample-v1.bin holds: a sample packed by the
// version 1 encoder (eight fields, a one-byte mask), before the fields of
// GPU health were added. It was written once by that encoder and is kept
// as it was.
func v1Sample() gpu.Sample {
	g0 := gpu.NewGPU(0, "GPU-aa11aa11-0000-1111-2222-333344445555", "NVIDIA H100 80GB HBM3")
	for f, v := range map[gpu.Field]float64{gpu.FieldUtil: 97, gpu.FieldMemUtil: 41, gpu.FieldMemUsed: 84013989888, gpu.FieldMemTotal: 85520809984,
		gpu.FieldTemp: 71, gpu.FieldPower: 689.5, gpu.FieldPowerLimit: 700, gpu.FieldSMClock: 1980} {
		g0.Values[f] = v
	}
	g1 := gpu.NewGPU(1, "GPU-bb22bb22-0000-1111-2222-333344445555", "NVIDIA H100 80GB HBM3")
	g1.Values[gpu.FieldUtil] = 12
	g1.Values[gpu.FieldMemTotal] = 85520809984
	g2 := gpu.NewGPU(2, "GPU-cc33cc33-0000-1111-2222-333344445555", "NVIDIA H100 80GB HBM3")
	g2.Err = "nvml: ERROR_GPU_IS_LOST"
	return gpu.Sample{TimestampMs: 1_796_215_660_000, GPUs: []gpu.GPU{g0, g1, g2},
		Processes: []gpu.Process{{GPU: 0, PID: 4242, Name: "python", MemUsedBytes: 83675136000}, {GPU: 1, PID: 4243, Name: "", MemUsedBytes: -1}}}
}

func sameSample(t *testing.T, got, want gpu.Sample) {
	t.Helper()
	if len(got.GPUs) != len(want.GPUs) || len(got.Processes) != len(want.Processes) {
		t.Fatalf("decoded %d GPUs and %d processes, want %d and %d", len(got.GPUs), len(got.Processes), len(want.GPUs), len(want.Processes))
	}
	for i := range want.GPUs {
		g, w := got.GPUs[i], want.GPUs[i]
		if g.Index != w.Index || g.UUID != w.UUID || g.Name != w.Name || g.Err != w.Err {
			t.Errorf("GPU %d: %+v, want %+v", i, g, w)
		}
		for f := range gpu.NumFields {
			gv, wv := g.Values[f], w.Values[f]
			if gpu.IsMissing(gv) != gpu.IsMissing(wv) || !gpu.IsMissing(wv) && gv != wv {
				t.Errorf("GPU %d %s: %v, want %v", i, gpu.Field(f), gv, wv)
			}
		}
	}
	for i := range want.Processes {
		if got.Processes[i] != want.Processes[i] {
			t.Errorf("process %d: %+v, want %+v", i, got.Processes[i], want.Processes[i])
		}
	}
}

// TestDecodeVersion1: a sample packed before the format change reads
// back with its eight readings, and the new fields missing.
func TestDecodeVersion1(t *testing.T) {
	data, err := os.ReadFile("testdata/sample-v1.bin")
	if err != nil {
		t.Fatal(err)
	}
	if data[0] != 1 {
		t.Fatalf("the fixture starts with version %d, not 1", data[0])
	}
	var got gpu.Sample
	if err := gpu.DecodeSample(data, &got); err != nil {
		t.Fatalf("decode a version 1 sample: %v", err)
	}
	sameSample(t, got, v1Sample())
	// Written again, it is a version 2 sample with the same readings.
	again := gpu.AppendSample(nil, &got)
	if again[0] != 2 {
		t.Fatalf("written as version %d", again[0])
	}
	var back gpu.Sample
	if err := gpu.DecodeSample(again, &back); err != nil {
		t.Fatal(err)
	}
	sameSample(t, back, v1Sample())
}

// TestVersion2HoldsEveryField: each of the fields beyond the eighth, which
// a one-byte mask would lose, comes back exactly; integer fields as
// integers.
func TestVersion2HoldsEveryField(t *testing.T) {
	g := gpu.NewGPU(3, "GPU-dd", "NVIDIA H100 80GB HBM3")
	for f := range gpu.NumFields {
		g.Values[f] = float64(100 + f)
	}
	g.Values[gpu.FieldThrottleReasons] = float64(gpu.ThrottleHwThermal | gpu.ThrottleSwPowerCap)
	g.Values[gpu.FieldECCCorrected] = 1 << 40
	g.Values[gpu.FieldECCUncorrected] = 2
	g.Values[gpu.FieldXid] = 79
	g.Values[gpu.FieldMemClock] = 2619.5
	in := gpu.Sample{GPUs: []gpu.GPU{g}}
	data := gpu.AppendSample(nil, &in)
	var out gpu.Sample
	if err := gpu.DecodeSample(data, &out); err != nil {
		t.Fatal(err)
	}
	sameSample(t, out, in)
	// Each field alone, so that every bit of the mask is exercised.
	for f := range gpu.NumFields {
		one := gpu.NewGPU(0, "", "")
		one.Values[f] = 7
		var o gpu.Sample
		if err := gpu.DecodeSample(gpu.AppendSample(nil, &gpu.Sample{GPUs: []gpu.GPU{one}}), &o); err != nil {
			t.Fatal(err)
		}
		for f2 := range gpu.NumFields {
			if v := o.GPUs[0].Values[f2]; (f2 == f) != !gpu.IsMissing(v) || f2 == f && v != 7 {
				t.Errorf("only %s set: %s reads %v", gpu.Field(f), gpu.Field(f2), v)
			}
		}
	}
}

func TestVersion2Corrupt(t *testing.T) {
	tests := map[string][]byte{
		"ErrUnknownFieldBit": {2, 1, 0, 0, 0, 0, 0x80, 0x80, 0x02, 0},       // bit 15
		"ErrVersion3":        {3, 0, 0},                                     // a later version
		"ErrTruncatedMask":   {2, 1, 0, 0, 0, 0, 0x80},                      // varint cut
		"ErrV1LaterFields":   {1, 1, 0, 0, 0, 0, 0x01, 0, 0, 0x80, 0x3f, 1}, // one float, then garbage
	}
	for name, data := range tests {
		t.Run(name, func(t *testing.T) {
			var s gpu.Sample
			if err := gpu.DecodeSample(data, &s); !errors.Is(err, gpu.ErrCorrupt) {
				t.Errorf("decoded %x: %v, want ErrCorrupt", data, err)
			}
		})
	}
}

// TestSpoolVersion1: an agent's spool written before the format change
// (records embedding version 1 samples) is sent after an upgrade.
func TestSpoolVersion1(t *testing.T) {
	dir := t.TempDir()
	src := "testdata/spool-v1"
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sp, err := gpu.OpenSpool(dir, gpu.SpoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	recs, err := sp.Peek(10)
	if err != nil || len(recs) != 3 {
		t.Fatalf("peek: %d records, %v", len(recs), err)
	}
	for i, r := range recs {
		want := v1Sample()
		want.TimestampMs += int64(i) * 10_000
		if r.Labels.Node != "gpu-07" || r.Labels.NodeRank != 1 || r.Sample.TimestampMs != want.TimestampMs {
			t.Errorf("record %d: %+v", i, r.Labels)
		}
		sameSample(t, r.Sample, want)
	}
}

func TestThrottleReasonString(t *testing.T) {
	for r, want := range map[gpu.ThrottleReason]string{
		0: "", gpu.ThrottleHwThermal | gpu.ThrottleSwPowerCap: "sw_power_cap,hw_thermal", 0x1000 | gpu.ThrottleGPUIdle: "gpu_idle,0x1000",
	} {
		if got := r.String(); got != want {
			t.Errorf("%#x: %q, want %q", uint64(r), got, want)
		}
	}
}
